"""Bookmark storage: SQLite with an FTS5 index kept in sync by triggers."""

import sqlite3

MIGRATIONS = (
    "CREATE TABLE bookmarks (id INTEGER PRIMARY KEY, url TEXT UNIQUE NOT NULL, title TEXT, tags TEXT,"
    " created TEXT DEFAULT CURRENT_TIMESTAMP)",
    "CREATE VIRTUAL TABLE bookmarks_fts USING fts5(title, tags, content='bookmarks', content_rowid='id')",
)


class DuplicateBookmark(ValueError):
    """The url is stored already."""


def migrate(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER)")
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    current = row[0] or 0
    for version, statement in enumerate(MIGRATIONS[current:], start=current + 1):
        conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
    conn.commit()
    return len(MIGRATIONS)


class Repository:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def add(self, url: str, title: str, tags: list[str]) -> int:
        try:
            cur = self.conn.execute("INSERT INTO bookmarks (url, title, tags) VALUES (?, ?, ?)",
                                    (url, title, " ".join(tags)))
        except sqlite3.IntegrityError:
            raise DuplicateBookmark(url) from None
        return cur.lastrowid

    def by_tag(self, tag: str) -> list[tuple]:
        return self.conn.execute("SELECT id, url, title, tags FROM bookmarks WHERE ' ' || tags || ' ' LIKE ?"
                                 " ORDER BY id DESC", (f"% {tag} %",)).fetchall()
