"""Importing earlier conversations into a memory (`endless import`)."""
