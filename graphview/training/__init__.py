"""Training: updaters with learning-rate schedules, fit, evaluate and training listeners (ADR 0013)."""
from graphview.training.config import TrainingConfig
from graphview.training.evaluation import Evaluation, evaluate
from graphview.training.fit import fit, validate
from graphview.training.history import History
from graphview.training.listeners import (CheckpointListener, EarlyStoppingListener, ProgressBar, ScoreListener,
                                          TrainingContext, load_updater_state, save_checkpoint, state_path)
from graphview.training.schedules import Constant, CosineDecay, ExponentialDecay, Schedule, StepDecay
from graphview.training.updaters import SGD, Adam, AdamW, RMSProp, Updater

__all__ = ["TrainingConfig", "Evaluation", "evaluate", "fit", "validate", "History", "CheckpointListener",
           "EarlyStoppingListener", "ProgressBar", "ScoreListener", "TrainingContext", "load_updater_state",
           "save_checkpoint", "state_path", "Schedule", "Constant", "StepDecay", "ExponentialDecay", "CosineDecay",
           "Updater", "SGD", "Adam", "AdamW", "RMSProp"]
