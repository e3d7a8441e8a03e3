"""The pages' view models (pure): query rows in, typed values the templates show out."""
