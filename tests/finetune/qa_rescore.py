#!/usr/bin/env python3
"""Re-scores grzo-finetune's predictions.jsonl of a SQuAD or DROP run with the official
scoring code, written here in Python as the official scripts have it (SQuAD v1.1's
evaluate-v1.1.py; DROP's drop_eval.py, with an exhaustive search in place of scipy's
linear_sum_assignment, so only the standard library is needed), and compares each line's
em/f1 and the means with what grzo-finetune wrote (results.json's test_em / test_f1).

usage: qa_rescore.py squad|drop DATA_FILE PREDICTIONS_JSONL RESULTS_JSON
Exits 0 when everything agrees, 1 with a message otherwise."""
import collections
import itertools
import json
import re
import string
import sys

# ---- SQuAD v1.1 (evaluate-v1.1.py) ----


def squad_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def squad_f1(prediction, ground_truth):
    p = squad_normalize(prediction).split()
    g = squad_normalize(ground_truth).split()
    common = collections.Counter(p) & collections.Counter(g)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision, recall = num_same / len(p), num_same / len(g)
    return 2 * precision * recall / (precision + recall)


def squad_score(prediction, golds):
    em = max(float(squad_normalize(prediction) == squad_normalize(g[0])) for g in golds)
    return em, max(squad_f1(prediction, g[0]) for g in golds)


def squad_golds(path):
    out = {}
    for article in json.load(open(path, encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                out[qa["id"]] = [(a["text"],) for a in qa["answers"]]
    return out


# ---- DROP (drop_eval.py) ----


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def drop_normalize(text):
    parts = []
    for token in re.split(" |-", text):
        t = token.lower()
        if not _is_number(t):
            t = "".join(ch for ch in t if ch not in set(string.punctuation))
        if _is_number(t):
            t = str(float(t))
        t = re.sub(re.compile(r"\b(a|an|the)\b", re.UNICODE), " ", t)
        parts.append(" ".join(t.split()))
    return " ".join(p for p in parts if p.strip()).strip()


def _bags(answer):
    spans = answer if isinstance(answer, (list, tuple)) else [answer]
    normalized = [drop_normalize(s) for s in spans]
    return normalized, [set(n.split()) for n in normalized]


def _f1(pred_bag, gold_bag):
    inter = len(gold_bag & pred_bag)
    precision = 1.0 if not pred_bag else inter / len(pred_bag)
    recall = 1.0 if not gold_bag else inter / len(gold_bag)
    return 0.0 if precision == 0.0 and recall == 0.0 else 2 * precision * recall / (precision + recall)


def _numbers_match(gold_bag, pred_bag):
    gold_numbers = {w for w in gold_bag if _is_number(w)}
    pred_numbers = {w for w in pred_bag if _is_number(w)}
    return not gold_numbers or bool(gold_numbers & pred_numbers)


def drop_metrics(predicted, gold):
    p_spans, p_bags = _bags(predicted)
    g_spans, g_bags = _bags(gold)
    em = 1.0 if set(p_spans) == set(g_spans) and len(p_spans) == len(g_spans) else 0.0
    scores = [[_f1(p, g) if _numbers_match(g, p) else 0.0 for p in p_bags] for g in g_bags]
    # the best one-to-one matching (linear_sum_assignment), by exhaustive search
    n_g, n_p = len(g_bags), len(p_bags)
    best = 0.0
    if n_g <= n_p:
        for cols in itertools.permutations(range(n_p), n_g):
            best = max(best, sum(scores[r][c] for r, c in enumerate(cols)))
    else:
        for rows in itertools.permutations(range(n_g), n_p):
            best = max(best, sum(scores[r][c] for c, r in enumerate(rows)))
    return em, round(best / max(n_g, n_p), 2)


def drop_answer_strings(answer):
    if "number" in answer and answer["number"]:
        return (str(answer["number"]),)
    if "spans" in answer and answer["spans"]:
        return tuple(answer["spans"])
    return ("{0} {1} {2}".format(answer["date"]["day"], answer["date"]["month"], answer["date"]["year"]).strip(),)


def drop_score(prediction, golds):
    em = f1 = 0.0
    for gold in golds:
        if gold[0].strip() != "":
            e, f = drop_metrics(prediction, gold)
            em, f1 = max(em, e), max(f1, f)
    return em, f1


def drop_golds(path):
    out = {}
    for section in json.load(open(path, encoding="utf-8")).values():
        for qa in section["qa_pairs"]:
            answers = [qa["answer"]] + (qa.get("validated_answers") or [])
            out[qa["query_id"]] = [drop_answer_strings(a) for a in answers]
    return out


def main():
    task, data, predictions, results = sys.argv[1:5]
    golds = squad_golds(data) if task == "squad" else drop_golds(data)
    score = squad_score if task == "squad" else drop_score
    lines = [json.loads(line) for line in open(predictions, encoding="utf-8")]
    res = json.load(open(results, encoding="utf-8"))
    if len(lines) != res["n_test"] or not lines:
        sys.exit("%d predictions for %d test questions" % (len(lines), res["n_test"]))
    sum_em = sum_f1 = 0.0
    for line in lines:
        if "\n" in line["prediction"]:
            sys.exit("%s: the prediction holds a newline: %r" % (line["id"], line["prediction"]))
        em, f1 = score(line["prediction"], golds[line["id"]])
        if abs(em - line["em"]) > 1e-6 or abs(f1 - line["f1"]) > 1e-6:
            sys.exit("%s: %r scores em %g f1 %g, grzo-finetune wrote em %g f1 %g"
                     % (line["id"], line["prediction"], em, f1, line["em"], line["f1"]))
        sum_em += em
        sum_f1 += f1
    n = len(lines)
    if abs(sum_em / n - res["test_em"]) > 2e-6 or abs(sum_f1 / n - res["test_f1"]) > 2e-6:
        sys.exit("means em %.6f f1 %.6f, results.json has %.6f %.6f" % (sum_em / n, sum_f1 / n, res["test_em"], res["test_f1"]))
    print("ok: %d predictions re-scored (%s), em %.4f f1 %.4f" % (n, task, sum_em / n, sum_f1 / n))


if __name__ == "__main__":
    main()
