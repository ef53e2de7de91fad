"""A warm spare's preload (hpsearch's conf: hydra.launcher.preload): TensorFlow, imported the
way a job imports it, quietly.

A bare `import tensorflow` prints absl's start-up lines (the oneDNN banner) before
TF_CPP_MIN_LOG_LEVEL applies, so a job that started in a spare had them in its stderr.log
and a cold job did not. The level is the job's own: the launcher creates every job process,
spare or cold, with the config's `hydra.launcher.env` (TF_CPP_MIN_LOG_LEVEL: ${tf_log_level}).
"""

import os

from hpsearch.tf_import import import_tensorflow

import_tensorflow(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")))  # 0: TensorFlow's default
