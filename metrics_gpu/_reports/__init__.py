"""The full label report from one pass (``labels``: ``label_report``,
``LabelReport``) and the self-contained HTML page of a report (``html``).
See docs/architecture.md, "The floors"."""
