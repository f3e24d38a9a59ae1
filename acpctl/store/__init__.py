"""The session history store: one directory per session, the files are the truth."""
