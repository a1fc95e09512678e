"""The `endless` commands that read and change memories."""
