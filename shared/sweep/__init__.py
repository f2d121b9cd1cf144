"""The scheduled sweep: idle auto-suspend and the safety net for lost events (`decide` is
pure; `executor` lists and acts; `report` keeps the summary and logs it)."""
