"""Every formula, once, over the accumulated counts and an array namespace
``xp`` (NumPy or CuPy): the state types a backend produces (``state``), the
label and score metrics (``labels``), the ranked scan of the ranking metrics
(``ranking``) and the bootstrap's counter-based draws (``resample``). Below
the backends, which produce these states and use these formulas as their
reference. See docs/architecture.md, "The floors"."""
