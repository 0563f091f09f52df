"""The ground floor: what every other floor may use and nothing here imports
back. The option types of the public functions (``types``), the parameters
many docstrings share (``docs``), the wording of install hints (``extras``),
the command-line option of each file-report input (``options``) and the
version (``version``). See docs/architecture.md, "The floors"."""
