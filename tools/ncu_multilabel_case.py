"""The inputs Nsight Compute profiles the two multilabel kernels on (a GPU machine, repo root):

    ncu --kernel-name regex:multilabel --launch-skip 2 --launch-count 2 \\
        --section SpeedOfLight --section Occupancy python3 tools/ncu_multilabel_case.py

``hamming_loss`` on (1e7, 10) int8 torch CUDA tensors (``validate=False``:
multilabel_update alone) and ``label_ranking_loss`` on (1e6, 100) float32
scores and int8 targets (multilabel_ranking), twice each: skip the first two
launches (the warm-up calls) and profile the second pair.
"""
import torch

import metrics_gpu as mg

torch.manual_seed(0)
y = (torch.rand(10_000_000, 10, device="cuda") < 0.2).to(torch.int8)
p = (torch.rand(10_000_000, 10, device="cuda") < 0.2).to(torch.int8)
scores = torch.rand(1_000_000, 100, device="cuda")
relevant = (torch.rand(1_000_000, 100, device="cuda") < 0.2).to(torch.int8)
for _ in range(2):
    mg.hamming_loss(y, p, validate=False)
    mg.label_ranking_loss(relevant, scores)
torch.cuda.synchronize()
print("ok")
