"""The part of Hermes 0.19.0's state.db schema the importer reads, for tests that make one by hand."""

SCHEMA = """
    CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, title TEXT,
                           cwd TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL);
    CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
                           content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
                           timestamp REAL NOT NULL, active INTEGER NOT NULL DEFAULT 1,
                           compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT);
"""
