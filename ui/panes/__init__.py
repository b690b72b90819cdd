"""One module per dashboard tab; each pane loads its own data off the UI thread and shows it."""
