"""Connectionist temporal classification: the forward-backward (alpha-beta) recursion in log space.

log_probs is (T, N, C) as PyTorch's ctc_loss takes it, labels (N, S) int64 padded, input_lengths and
label_lengths (N,) int64; every entry the recursion reads was checked with first_bad_entry (Numba
does no bounds checking). The recursion runs over the extended label sequence blank, l1, blank, l2,
..., blank (2K + 1 states for K labels) in float64 whatever log_probs' dtype.

alpha[t, s] is the log probability of the paths over frames 0..t that end in state s (y_t included),
beta[s] at frame t that of the frames after t given state s at t (y_t not included), so
exp(alpha[t, s] + beta[s] + loss) is the posterior of state s at frame t, and the gradient of the
loss -log p for log_probs[t, n, c] is minus the sum of those posteriors over the states labelled c
(the derivative with log_probs taken as free inputs; see ADR 0022 for PyTorch's convention).
"""
import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .threads import PARALLEL_THRESHOLD, WORKERS, chunks, pool

JIT = dict(cache=True, nogil=True, error_model="numpy")

VALID, BAD_INPUT_LENGTH, BAD_LABEL_LENGTH, BAD_LABEL = 0, 1, 2, 3


@njit(**JIT)
def first_bad_entry(labels, input_lengths, label_lengths, frames, classes, blank):
    """(what, sequence, position) of the first invalid entry: what is VALID (0) when all are valid,
    BAD_INPUT_LENGTH outside [0, frames], BAD_LABEL_LENGTH outside [0, S], BAD_LABEL for a label
    (within its sequence's length) outside [0, classes) or equal to blank. Padding labels are not read."""
    batch, width = labels.shape
    for n in range(batch):
        if input_lengths[n] < 0 or input_lengths[n] > frames:
            return BAD_INPUT_LENGTH, n, 0
        if label_lengths[n] < 0 or label_lengths[n] > width:
            return BAD_LABEL_LENGTH, n, 0
        for s in range(label_lengths[n]):
            k = labels[n, s]
            if k < 0 or k >= classes or k == blank:
                return BAD_LABEL, n, s
    return VALID, -1, -1


@register_jitable
def log_add(a, b):
    """log(exp(a) + exp(b)) without overflow; -inf when both are -inf (not NaN)."""
    if a < b:
        a, b = b, a
    if b == -np.inf:
        return a
    return a + math.log1p(math.exp(b - a))


@register_jitable
def log_add3(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) without overflow; -inf when all three are -inf (not NaN)."""
    top = max(a, max(b, c))
    if top == -np.inf:
        return -np.inf
    return top + math.log(math.exp(a - top) + math.exp(b - top) + math.exp(c - top))


@register_jitable
def extend(labels, n, states, blank, extended, skip):
    """The extended sequence's classes (blank, l1, blank, l2, ..., blank) and whether a path may go from
    state s - 2 to s (s is a label different from the label before it)."""
    for s in range(states):
        extended[s] = blank if s % 2 == 0 else labels[n, s // 2]
        skip[s] = s % 2 == 1 and s >= 2 and labels[n, s // 2] != labels[n, s // 2 - 1]


@register_jitable
def forward(log_probs, n, frames, states, extended, skip, alpha):
    """Fill alpha[:frames, :states] for sequence n; returns the loss -log p (inf when no path fits).
    Only the states a complete path can occupy at frame t are computed (the others stay -inf)."""
    for s in range(states):
        alpha[0, s] = -np.inf
    alpha[0, 0] = log_probs[0, n, extended[0]]
    if states > 1:
        alpha[0, 1] = log_probs[0, n, extended[1]]
    for t in range(1, frames):
        lo = max(0, states - 2 * (frames - t))
        hi = min(states, 2 * t + 2)
        for s in range(states):
            if s < lo or s >= hi:
                alpha[t, s] = -np.inf
                continue
            if skip[s]:
                total = log_add3(alpha[t - 1, s], alpha[t - 1, s - 1], alpha[t - 1, s - 2])
            elif s >= 1:
                total = log_add(alpha[t - 1, s], alpha[t - 1, s - 1])
            else:
                total = alpha[t - 1, s]
            alpha[t, s] = total + log_probs[t, n, extended[s]] if total != -np.inf else -np.inf
    end = alpha[frames - 1, states - 1]
    if states > 1:
        end = log_add(end, alpha[frames - 1, states - 2])
    return -end


@register_jitable
def backward(log_probs, n, frames, states, extended, skip, alpha, loss, weight, beta, following, totals, grad):
    """grad[t, n, c] = -weight * (sum of the posteriors of the states labelled c at frame t), t < frames."""
    classes = log_probs.shape[2]
    for s in range(states):
        beta[s] = -np.inf
    beta[states - 1] = 0.0
    if states > 1:
        beta[states - 2] = 0.0
    for t in range(frames - 1, -1, -1):
        lo = max(0, states - 2 * (frames - t))
        hi = min(states, 2 * t + 2)
        if t < frames - 1:
            for s in range(states):
                following[s] = beta[s] + log_probs[t + 1, n, extended[s]] if beta[s] != -np.inf else -np.inf
            for s in range(states):
                if s < lo or s >= hi:
                    beta[s] = -np.inf
                    continue
                if s + 2 < states and skip[s + 2]:
                    beta[s] = log_add3(following[s], following[s + 1], following[s + 2])
                elif s + 1 < states:
                    beta[s] = log_add(following[s], following[s + 1])
                else:
                    beta[s] = following[s]
        for c in range(classes):
            totals[c] = 0.0
        for s in range(lo, hi):
            v = alpha[t, s] + beta[s]
            if v != -np.inf:
                totals[extended[s]] += math.exp(v + loss)
        for c in range(classes):
            grad[t, n, c] = -weight * totals[c]


@njit(**JIT)
def ctc_sequences(log_probs, labels, input_lengths, label_lengths, blank, zero_infinity, weights, first, last,
                  losses, grad, want_grad):
    """For sequences first..last-1: losses[n] = -log p(labels[n, :label_lengths[n]] | log_probs[:input_lengths[n],
    n]) (inf when the labels need more frames than there are; 0 when both lengths are 0) and, when want_grad,
    grad[:, n, :] = weights[n] times its gradient for log_probs: 0 past input_lengths[n], 0 for an infinite
    loss with zero_infinity, NaN at the valid frames of an infinite loss without it (as PyTorch)."""
    total_frames, batch, classes = log_probs.shape
    longest = 1
    for n in range(first, last):
        longest = max(longest, 2 * label_lengths[n] + 1)
    alpha = np.empty((max(total_frames, 1), longest))
    extended = np.empty(longest, np.int64)
    skip = np.empty(longest, np.bool_)
    beta = np.empty(longest)
    following = np.empty(longest)
    totals = np.empty(classes)
    for n in range(first, last):
        frames = input_lengths[n]
        states = 2 * label_lengths[n] + 1
        extend(labels, n, states, blank, extended, skip)
        if frames == 0:
            loss = 0.0 if states == 1 else np.inf
        else:
            loss = forward(log_probs, n, frames, states, extended, skip, alpha)
        losses[n] = loss
        if not want_grad:
            continue
        for t in range(total_frames):
            for c in range(classes):
                grad[t, n, c] = 0.0
        if frames == 0 or (loss == np.inf and zero_infinity):
            continue
        if loss == np.inf:
            for t in range(frames):
                for c in range(classes):
                    grad[t, n, c] = np.nan
            continue
        backward(log_probs, n, frames, states, extended, skip, alpha, loss, weights[n], beta, following, totals, grad)


def ctc(log_probs, labels, input_lengths, label_lengths, blank, zero_infinity, weights, losses, grad, want_grad):
    """ctc_sequences over all sequences, split over threads by sequence when the work is large."""
    frames, batch, _ = log_probs.shape
    work = frames * batch * (2 * labels.shape[1] + 1)
    if work < PARALLEL_THRESHOLD or batch < 2 or WORKERS == 1:
        ctc_sequences(log_probs, labels, input_lengths, label_lengths, blank, zero_infinity, weights, 0, batch,
                      losses, grad, want_grad)
        return
    futures = [pool().submit(ctc_sequences, log_probs, labels, input_lengths, label_lengths, blank, zero_infinity,
                             weights, lo, hi, losses, grad, want_grad) for lo, hi in chunks(batch)]
    for future in futures:
        future.result()
