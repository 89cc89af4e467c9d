"""The layer level: ``from graphview import layers as L`` (ADR 0023). A layer adds ops and VARIABLEs to a
graph under its name when called; ``gv.Sequential`` applies layers in order."""
from graphview.layers.base import Layer
from graphview.layers.basic import (ACTIVATIONS, ELU, GELU, SELU, Activation, Dense, Dropout, Embedding, Flatten,
                                    HardTanh, LeakyReLU, LogSigmoid, LogSoftmax, ReLU, Reshape, Sigmoid, SiLU,
                                    Softmax, Softplus, Tanh)
from graphview.layers.containers import Sequential
from graphview.layers.norm import BatchNorm, LayerNorm
from graphview.layers.sequence import GRU, LSTM, MultiHeadAttention
from graphview.layers.spatial import (AvgPool1D, AvgPool2D, Conv1D, Conv2D, GlobalAvgPool, MaxPool1D,
                                      MaxPool2D)

__all__ = [
    "Layer", "Sequential", "Dense", "Conv1D", "Conv2D", "MaxPool1D", "MaxPool2D", "AvgPool1D", "AvgPool2D",
    "GlobalAvgPool", "BatchNorm", "LayerNorm", "Dropout", "Embedding", "LSTM", "GRU", "MultiHeadAttention",
    "Flatten", "Reshape", "Activation", "ACTIVATIONS", "ReLU", "Sigmoid", "Tanh", "GELU", "ELU", "SELU",
    "Softplus", "SiLU", "LogSigmoid", "HardTanh", "LeakyReLU", "Softmax", "LogSoftmax",
]
