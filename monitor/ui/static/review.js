// The review pages' keys (served from /static: the page's CSP allows no inline script): 0-4 submit the label form
// with that level, s skips; after a label, n opens the next item. Keys typed into the comment box (or any field) are
// text, not commands.
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" || target.isContentEditable)) return;
    var next = document.getElementById("next");
    if (next && (event.key === "n" || event.key === "N")) {
      event.preventDefault();
      next.click();
      return;
    }
    var form = document.getElementById("label-form");
    if (!form) return;
    if (event.key >= "0" && event.key <= "4") {
      var button = form.querySelector('button[name="label"][value="' + event.key + '"]');
      if (button) {
        event.preventDefault();
        form.requestSubmit ? form.requestSubmit(button) : button.click();
      }
    } else if (event.key === "s" || event.key === "S") {
      var skip = document.getElementById("skip");
      if (skip) {
        event.preventDefault();
        skip.click();
      }
    }
  });
})();
