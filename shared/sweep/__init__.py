"""The scheduled sweep (docs/design.md#sweep): idle auto-suspend and the safety net for lost events.

`plan` decides (pure); `run` lists and acts; `report` keeps the summary and logs it.
"""
