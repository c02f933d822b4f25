"""Front doors: the protocols chat frontends already speak (AG-UI, the AI SDK's UI message stream), each
translating a session's log into its own events (docs/ag-ui.md, docs/ai-sdk.md)."""
