"""The scheduled sweep (SPEC §6): idle auto-suspend and the safety net for lost events.

`plan` decides (pure); `execute` lists, acts and reports.
"""
