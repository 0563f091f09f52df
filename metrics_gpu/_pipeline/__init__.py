"""The stages every metric runs through, over the checks and the backends:
check, accumulate, evaluate and output (``stages``); the streaming state on a
backend (``stream_state``); the launch plans that replay a functional call's
launches (``planned``); what every report object shares (``mapping``); the
torch.compile boundary (``torch_compile``); the all-reduce of a stream's
counts (``distributed``). See docs/architecture.md, "The floors"."""
