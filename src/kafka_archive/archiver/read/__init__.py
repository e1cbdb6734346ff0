"""The read side (today's ``reading/`` moves here); ``foreign/`` reads other sinks' archives."""
