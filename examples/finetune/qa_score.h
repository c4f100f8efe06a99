/* qa_score.h - the official scores of the question-answering tasks of grzo-finetune:
   SQuAD v1.1 (evaluate-v1.1.py) and DROP (drop_eval.py, allennlp-reading-comprehension),
   re-implemented in C99 so that a fine-tuned model's generated answers get the same exact
   match and F1 as the official scripts give them.

   ---- SQuAD v1.1 ----
   normalize_answer(s) = white_space_fix(remove_articles(remove_punc(lower(s)))):
     lower            Python's str.lower()
     remove_punc      drops the characters of string.punctuation (ASCII !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)
     remove_articles  re.sub(r'\b(a|an|the)\b', ' ', text)
     white_space_fix  ' '.join(text.split())
   exact match: normalize(prediction) == normalize(gold); F1: token F1 of the normalized
   texts split at spaces, counting repeated tokens (collections.Counter), 0 when no token is
   shared. Both are maxima over the gold answers, taken separately.

   ---- DROP ----
   An answer is a tuple of spans (one for a number or a date, one or more for spans).
   _normalize_answer(span): split at ' ' and '-' (re.split(" |-")); per piece: lower; drop
   string.punctuation unless the piece is a number; a number becomes str(float(piece))
   ("12" -> "12.0", "1.2e1" -> "12.0", "1e16" -> "1e+16"); remove articles; fix whitespace;
   empty pieces go; the rest are joined with ' '. A piece "is a number" when Python's
   float() accepts it (signs, exponents, "inf"/"nan", underscores between digits, whitespace
   around). get_metrics(predicted spans, gold spans): exact match = the two sets of
   normalized spans are equal and the span counts too; F1 = each span is a set (bag) of
   tokens, a predicted bag and a gold bag score their set F1 only if the gold bag has no
   numbers or shares one with the predicted bag, the bags are matched one to one to
   maximize the total (scipy's linear_sum_assignment), and F1 is that total over
   max(#gold, #predicted), rounded to 2 decimals (numpy: rint(100 x) / 100). A question's
   score is the maximum over its gold answers (the "answer" and the "validated_answers")
   whose first span is not blank, EM and F1 each.

   ---- Unicode ----
   ASCII text behaves exactly as in Python. Beyond ASCII, Python consults the whole Unicode
   database; here: lower() maps the capitals of Latin-1, Latin Extended-A, Greek and
   Cyrillic (U+0130 becomes "i" + U+0307, as in Python) and leaves other scripts as they
   are; a character counts as a word character for \b unless it is whitespace or in the
   punctuation/symbol blocks listed in qa_score.c (Latin-1 punctuation, combining marks,
   General Punctuation, currency, arrows and mathematical/technical symbols, box drawing to
   dingbats, CJK punctuation, fullwidth punctuation, emoji); float() accepts ASCII digits
   only (Python also takes other scripts' decimal digits). Invalid UTF-8 in a prediction
   reads as U+FFFD, as a tokenizer's decode(errors="replace") gives it.

   Every function returns 0, or -1 for bad arguments or no memory. */
#ifndef GRZO_QA_SCORE_H
#define GRZO_QA_SCORE_H

#include <stddef.h>
#include <stdint.h>

/* One gold answer: spans[0..n_spans). SQuAD answers have one span. */
typedef struct qa_answer {
    const char *const *spans;
    int n_spans;
} qa_answer;

/* SQuAD v1.1's normalize_answer; *out is malloc'd (free it). */
int qa_squad_normalize(const char *s, char **out);
/* evaluate-v1.1.py for one question: maxima over the golds' first spans. */
int qa_squad_score(const char *prediction, const qa_answer *golds, int n_golds, double *em, double *f1);

/* drop_eval.py's _normalize_answer; *out is malloc'd. */
int qa_drop_normalize(const char *span, char **out);
/* drop_eval.py's get_metrics(predicted, gold) for span lists. */
int qa_drop_metrics(const char *const *predicted, int n_predicted, const char *const *gold, int n_gold, double *em,
                    double *f1);
/* drop_eval.py's evaluate_json for one question whose prediction is one string. */
int qa_drop_score(const char *prediction, const qa_answer *golds, int n_golds, double *em, double *f1);

/* Python helpers the scorers share with the task readers (tasks.c). */
/* Length of the well-formed UTF-8 sequence at s[0..n) (1-4) with its code point, or 0 if
   it is not one (overlong forms, surrogates, > U+10FFFF, truncated). */
size_t qa_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);
/* Python's str.isspace() for one code point. */
int qa_py_isspace(uint32_t cp);
/* Python's float(s) acceptance (see above); the value in *value when not NULL. */
int qa_py_is_number(const char *s, double *value);
/* Python's repr(float) / str(float): "12.0", "1e+16", "0.0001", "1e-05", "inf", "nan". */
void qa_py_float_repr(double x, char buf[32]);

#endif /* GRZO_QA_SCORE_H */
