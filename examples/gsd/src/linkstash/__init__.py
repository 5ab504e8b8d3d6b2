"""linkstash: save, list and search bookmarks."""
