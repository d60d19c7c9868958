"""The 2025-era protocol (2025-03-26, 2025-06-18, 2025-11-25) over Streamable HTTP, served from
the same task store as 2026-07-28: sessions (``session``) and the methods they call
(``methods``)."""
