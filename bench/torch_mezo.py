#!/usr/bin/env python3
"""torch_mezo.py - the PyTorch peer of bench_llm: the official in-place MeZO step
(Malladi et al. 2023, princeton-nlp/MeZO trainer.py: zo_step + zo_update) with Hugging Face
transformers on the same token batch as bench_llm, so that grzo's figures can be compared
with what users run today in one command.

    ./build/bench/bench_llm --model build/models/SmolLM2-135M-Instruct.Q4_1.gguf --dump-tokens batch.json
    python3 bench/torch_mezo.py --model HuggingFaceTB/SmolLM2-135M-Instruct --tokens batch.json

--model is a transformers model id or folder with the same weights as bench_llm's GGUF
(SmolLM2-135M-Instruct; the GGUF is Q4_1, dequantized to fp32 by grzo, so the weights are
close but not bit-equal: timing, not loss values, is what is compared).

The step, as MeZO does it (z ~ N(0, 1), regenerated from one seed each time, never stored):
    theta += eps z;  loss+ = f(theta);  theta -= 2 eps z;  loss- = f(theta);  theta += eps z
    g = (loss+ - loss-) / (2 eps);  theta -= lr (g z + wd theta)   (no decay on biases/norms)
The loss of an example is the cross-entropy over the two candidate tokens (" terrible",
" great") at the prompt's last position, as in bench_llm. Each step forwards the B
sequences twice (MeZO's two passes of B), like grzo's MeZO step; "inference" is one plain
forward of the same 2B sequences, like bench_llm's.

It times, interleaved round by round (median of rounds), for dtype fp32 and bf16 and for
two layouts of the batch:
  padded: [B, max_len] with right padding and an attention mask;
  packed: all B sequences in one row [1, sum(len)], position_ids restarting at 0 for each
          sequence and a block-diagonal causal mask (sequences never see each other);
and prints the peak memory of each case: on CUDA torch's peak allocated memory (reset before
the case); on the CPU the process's peak resident memory (VmHWM) while the case ran, reset
through /proc/self/clear_refs before it (Linux >= 4.0), the model's weights included; where
that reset fails, the whole process's high-water mark (ru_maxrss), which later cases inherit
from earlier ones: the output says which.

The arguments and the token batch are checked before torch is imported (one line on stderr,
exit 2 for a bad value, 1 for an unreadable batch). Without torch or transformers it then
prints SKIP and exits 77 (grzo's CI does not install torch).
"""
import argparse
import json
import math
import os
import re
import resource
import statistics
import sys
import time


PROG = "torch_mezo.py"


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block): grzo's CLIs' convention."""

    def error(self, message):
        print("%s: %s (try --help)" % (PROG, message), file=sys.stderr)
        sys.exit(2)


def real_number(check, what):
    """An argparse type: a finite float for which check(x) holds."""

    def convert(text):
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected %s, got '%s'" % (what, text))
        if not math.isfinite(x) or not check(x):
            raise argparse.ArgumentTypeError("expected %s, got '%s'" % (what, text))
        return x

    return convert


def parse_args():
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                   help="transformers model id or local folder (default: %(default)s)")
    p.add_argument("--tokens", required=True, help="token batch written by bench_llm --dump-tokens")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (default %(default)s)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads, 0 = torch default")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default %(default)s)")
    p.add_argument("--dtypes", default="fp32,bf16", help="comma list of fp32, bf16 (default %(default)s)")
    p.add_argument("--layouts", default="padded,packed", help="comma list of padded, packed (default %(default)s)")
    # eps divides the loss difference; lr and wd scale the update: each finite, eps and lr > 0
    p.add_argument("--eps", type=real_number(lambda x: x > 0, "a finite number > 0"), default=1e-3,
                   help="MeZO's perturbation scale (default %(default)s)")
    p.add_argument("--lr", type=real_number(lambda x: x > 0, "a finite number > 0"), default=1e-7,
                   help="learning rate (default %(default)s)")
    p.add_argument("--wd", type=real_number(lambda x: x >= 0, "a finite number >= 0"), default=0.0,
                   help="weight decay (default %(default)s)")
    a = p.parse_args()
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    if a.threads < 0:
        p.error("--threads must be 0 or more")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", a.device):
        p.error("--device: expected cpu, cuda or cuda:N, got '%s'" % a.device)
    for d in a.dtypes.split(","):
        if d not in ("fp32", "bf16"):
            p.error("--dtypes: unknown dtype '%s'" % d)
    for l in a.layouts.split(","):
        if l not in ("padded", "packed"):
            p.error("--layouts: unknown layout '%s'" % l)
    return a


class BatchError(Exception):
    """A --tokens file that is not bench_llm's token batch (the message says why)."""


def is_token(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def load_batch(path):
    """bench_llm --dump-tokens's file: {"candidates": [a, b], "examples": [{"tokens": [...],
    "label": 0 or 1}, ...]}. Raises BatchError with one line."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise BatchError("cannot read %s: %s" % (path, e.strerror or e))
    except (ValueError, UnicodeDecodeError) as e:   # json.JSONDecodeError is a ValueError
        raise BatchError("%s: not JSON (%s)" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("candidates"), list) or not isinstance(doc.get("examples"), list):
        raise BatchError("%s: not a bench_llm token batch (no \"candidates\" and \"examples\" lists)" % path)
    cand = doc["candidates"]
    if len(cand) != 2 or not all(is_token(c) for c in cand):
        raise BatchError("%s: \"candidates\" must be two token ids" % path)
    if not doc["examples"]:
        raise BatchError("%s: no examples" % path)
    ex = []
    for i, e in enumerate(doc["examples"]):
        tokens = e.get("tokens") if isinstance(e, dict) else None
        label = e.get("label") if isinstance(e, dict) else None
        if not isinstance(tokens, list) or not tokens or not all(is_token(t) for t in tokens):
            raise BatchError("%s: example %d: \"tokens\" must be a non-empty list of token ids" % (path, i))
        if label not in (0, 1) or isinstance(label, bool):
            raise BatchError("%s: example %d: \"label\" must be 0 or 1, got %s" % (path, i, json.dumps(label)))
        ex.append((tokens, label))
    return cand, ex


class Batch:
    """The B sequences in one layout, with where each sequence's last token sits."""

    def __init__(self, torch, examples, layout, device):
        lens = [len(t) for t, _ in examples]
        self.labels = torch.tensor([l for _, l in examples], device=device)
        self.n_tokens = sum(lens)
        if layout == "padded":
            width = max(lens)
            ids = torch.zeros((len(examples), width), dtype=torch.long)
            mask = torch.zeros((len(examples), width), dtype=torch.long)
            for i, (t, _) in enumerate(examples):
                ids[i, :len(t)] = torch.tensor(t)
                mask[i, :len(t)] = 1
            self.kwargs = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
            self.rows = torch.arange(len(examples), device=device)
            self.cols = torch.tensor([n - 1 for n in lens], device=device)
        else:
            # one row; position_ids restart per sequence; a 4D block-diagonal causal mask keeps
            # the sequences apart in every attention implementation (additive, 0 / -inf)
            ids = torch.tensor([x for t, _ in examples for x in t], dtype=torch.long).unsqueeze(0)
            pos = torch.tensor([i for n in lens for i in range(n)], dtype=torch.long).unsqueeze(0)
            seq = torch.tensor([s for s, n in enumerate(lens) for _ in range(n)])
            allowed = (seq[:, None] == seq[None, :]) & (torch.arange(len(seq))[:, None] >= torch.arange(len(seq))[None, :])
            self.mask_bool = allowed.view(1, 1, len(seq), len(seq)).to(device)
            self.kwargs = {"input_ids": ids.to(device), "position_ids": pos.to(device)}
            ends = []
            acc = 0
            for n in lens:
                acc += n
                ends.append(acc - 1)
            self.rows = torch.zeros(len(examples), dtype=torch.long, device=device)
            self.cols = torch.tensor(ends, device=device)

    def inputs(self, torch, dtype):
        kw = dict(self.kwargs)
        if hasattr(self, "mask_bool"):
            neg = torch.finfo(dtype).min
            kw["attention_mask"] = torch.zeros(self.mask_bool.shape, dtype=dtype,
                                               device=self.mask_bool.device).masked_fill(~self.mask_bool, neg)
        return kw


def candidate_loss(torch, model, batch, inputs, cand):
    """Mean over the B examples of the cross-entropy over the two candidates at the last token."""
    logits = model(**inputs).logits                      # [rows, len, vocab]
    last = logits[batch.rows, batch.cols][:, cand]       # [B, 2]
    return torch.nn.functional.cross_entropy(last.float(), batch.labels).item()


class MeZO:
    """princeton-nlp/MeZO's zo_perturb_parameters / zo_step / zo_update, unchanged in substance."""

    def __init__(self, torch, model, eps, lr, wd):
        self.torch, self.model, self.eps, self.lr, self.wd = torch, model, eps, lr, wd
        self.params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.seed = 0

    def perturb(self, scale):
        torch = self.torch
        torch.manual_seed(self.seed)
        for _, p in self.params:
            z = torch.normal(mean=0, std=1, size=p.data.size(), device=p.data.device, dtype=p.data.dtype)
            p.data = p.data + scale * z * self.eps

    def step(self, forward):
        self.seed = int(self.torch.randint(0, 1000000000, (1,)).item())
        self.perturb(1)
        loss1 = forward()
        self.perturb(-2)
        loss2 = forward()
        g = (loss1 - loss2) / (2 * self.eps)
        self.perturb(1)
        torch = self.torch
        torch.manual_seed(self.seed)
        for name, p in self.params:
            z = torch.normal(mean=0, std=1, size=p.data.size(), device=p.data.device, dtype=p.data.dtype)
            if "bias" not in name and "layer_norm" not in name and "layernorm" not in name:
                p.data = p.data - self.lr * (g * z + self.wd * p.data)
            else:
                p.data = p.data - self.lr * (g * z)
        return loss1


def proc_status_kib(key):
    """A "Key:  N kB" line of /proc/self/status, in KiB; None where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


class CpuPeak:
    """The peak resident memory of one case. reset() sets VmHWM back to the current RSS
    through /proc/self/clear_refs (Linux >= 4.0), so that a case does not inherit an earlier
    case's peak; where that fails, mib() falls back to ru_maxrss, the whole process's
    high-water mark, and self.exact says so."""

    def __init__(self):
        self.exact = True

    def reset(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self.exact = False

    def mib(self):
        hwm = proc_status_kib("VmHWM") if self.exact else None
        if hwm is None:
            self.exact = False
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: KiB
        return hwm / 1024.0


def reset_peak_memory(torch, device, cpu_peak):
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    else:
        cpu_peak.reset()


def peak_memory_mib(torch, device, cpu_peak):
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return cpu_peak.mib()


def peak_memory_note(device, cpu_peak):
    if device.startswith("cuda"):
        return "peak MiB: torch.cuda.max_memory_allocated() of each case, reset before it"
    if cpu_peak.exact:
        return ("peak MiB: the process's peak resident memory (VmHWM) during each case, reset through "
                "/proc/self/clear_refs before it (the model's weights included)")
    return ("peak MiB: ru_maxrss, the whole process's high-water mark (/proc/self/clear_refs could not reset "
            "it): a case's figure includes every earlier case's peak")


def sync(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main():
    args = parse_args()
    try:   # before torch: a wrong file is an error, not a skip
        cand, examples = load_batch(args.tokens)
    except BatchError as e:
        print("%s: --tokens: %s" % (PROG, e), file=sys.stderr)
        return 1
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print("SKIP: torch_mezo.py needs torch and transformers (%s)" % e)
        return 77
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("SKIP: --device %s but torch sees no CUDA device" % args.device)
        return 77
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cpu_peak = CpuPeak()
    B = len(examples)
    print("## torch %s, transformers MeZO peer of bench_llm\n" % torch.__version__)
    print("model %s, device %s, %d torch threads, B = %d examples, %d tokens, %d rounds, eps %g, lr %g"
          % (args.model, args.device, torch.get_num_threads(), B, sum(len(t) for t, _ in examples),
             args.rounds, args.eps, args.lr))
    print("\n| dtype | layout | inference of 2B s | MeZO step s | MeZO / inference | peak MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for dname in args.dtypes.split(","):
        dtype = torch.float32 if dname == "fp32" else torch.bfloat16
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype, attn_implementation="eager")
        model.to(args.device).eval()
        for p in model.parameters():
            p.requires_grad_(True)   # MeZO perturbs every trainable parameter; no autograd runs
        mezo = MeZO(torch, model, args.eps, args.lr, args.wd)
        for layout in args.layouts.split(","):
            batch = Batch(torch, examples, layout, args.device)
            batch2 = Batch(torch, examples + examples, layout, args.device)   # inference: the 2B sequences
            inputs, inputs2 = batch.inputs(torch, dtype), batch2.inputs(torch, dtype)

            def forward():
                with torch.inference_mode():
                    return candidate_loss(torch, model, batch, inputs, cand)

            def inference():
                with torch.inference_mode():
                    return candidate_loss(torch, model, batch2, inputs2, cand)

            reset_peak_memory(torch, args.device, cpu_peak)
            inference()           # warm-up
            mezo.step(forward)
            t_inf, t_step, ratios = [], [], []
            for r in range(args.rounds):
                times = {}
                for is_step in ((False, True) if r % 2 == 0 else (True, False)):   # alternate the order
                    sync(torch, args.device)
                    t0 = time.perf_counter()
                    loss = mezo.step(forward) if is_step else inference()
                    sync(torch, args.device)
                    times[is_step] = time.perf_counter() - t0
                    if not math.isfinite(loss):
                        print("error: non-finite loss in %s %s" % (dname, layout), file=sys.stderr)
                        return 1
                t_inf.append(times[False])
                t_step.append(times[True])
                ratios.append(times[True] / times[False])
            print("| %s | %s | %.3f | %.3f | %.2fx | %.0f |" % (dname, layout, statistics.median(t_inf),
                  statistics.median(t_step), statistics.median(ratios), peak_memory_mib(torch, args.device, cpu_peak)))
        del model, mezo
    print("\n" + peak_memory_note(args.device, cpu_peak))
    print("\nCompare: bench_llm's 'MeZO step' and 'GRZO step' rows on the same token batch "
          "(grzo's MeZO uses Rademacher z by default; the official MeZO uses Gaussian z, as here).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
