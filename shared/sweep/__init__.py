"""The scheduled sweep (docs/design.md#sweep): idle auto-suspend and the safety net for lost events.

`plan` decides (pure); `execute` lists, acts and reports.
"""
