"""Personal data: finding it in conversation text and replacing it with typed placeholders before the judge and
the store see the text (`spans.Redactor`, `redactor.RecognizerRedactor`), by validated recognizers (`recognizers`)."""
