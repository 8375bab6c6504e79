"""The TF-IDF + logistic-regression baseline of `bench/quality.py`.

TF-IDF of word 1-2-grams plus `char_wb` 2-5-grams (sublinear tf, capped term
counts, min_df 2) feeding a logistic regression whose C is chosen by 3-fold
cross-validated ROC-AUC on the training split only (or fixed).
"""

import glob
import os
import time
from typing import Any, Dict, Optional, Tuple

import numpy as np
import pandas as pd
from sklearn import metrics
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import FeatureUnion

TEXT_COLUMN = 'comment_text'
LABEL_COLUMN = 'toxic'
C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
CV_FOLDS = 3
SEED = 0


def read_split(data: str, split: str) -> pd.DataFrame:
  """Reads every CSV of one split; empty text stays the empty string.

  Raises:
    FileNotFoundError: if the split has no CSV files.
  """
  paths = sorted(glob.glob(os.path.join(data, split, '*.csv')))
  if not paths:
    raise FileNotFoundError(f'no CSV files in {os.path.join(data, split)}')
  # dtype=str and no NA parsing: a comment reading "NA" or "null" is text.
  frames = [pd.read_csv(path, dtype=str, keep_default_na=False)
            for path in paths]
  frame = pd.concat(frames, ignore_index=True)
  frame[LABEL_COLUMN] = frame[LABEL_COLUMN].astype(int)
  return frame


def make_vectorizer(max_word_features: int,
                    max_char_features: int) -> FeatureUnion:
  """TF-IDF of word 1-2-grams and within-word character 2-5-grams."""
  return FeatureUnion([
      ('words', TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True,
                                min_df=2, max_features=max_word_features)),
      ('chars', TfidfVectorizer(analyzer='char_wb', ngram_range=(2, 5),
                                sublinear_tf=True, min_df=2,
                                max_features=max_char_features)),
  ])


def _classifier(c: float) -> LogisticRegression:
  return LogisticRegression(C=c, solver='liblinear', max_iter=1000,
                            random_state=SEED)


def choose_c(features, labels: np.ndarray) -> Tuple[float, Dict[str, float]]:
  """Picks C by cross-validated ROC-AUC on the training split alone.

  The eval split must not choose the baseline's settings, or the baseline
  would be tuned on the data it is scored on.

  Returns:
    The best C and the mean CV AUC of every C tried.
  """
  folds = list(StratifiedKFold(CV_FOLDS, shuffle=True, random_state=SEED)
               .split(features, labels))
  scores = {}
  for c in C_GRID:
    fold_aucs = []
    for train_index, test_index in folds:
      model = _classifier(c).fit(features[train_index], labels[train_index])
      fold_aucs.append(metrics.roc_auc_score(
          labels[test_index],
          model.predict_proba(features[test_index])[:, 1]))
    scores[str(c)] = round(float(np.mean(fold_aucs)), 4)
  best = max(C_GRID, key=lambda c: scores[str(c)])
  return best, scores


def run_baseline(train: pd.DataFrame, evaluation: pd.DataFrame,
                 c: Optional[float], max_word_features: int,
                 max_char_features: int) -> Dict[str, Any]:
  """Trains the TF-IDF + logistic regression baseline and scores eval.

  Args:
    train: training rows.
    evaluation: eval rows.
    c: inverse regularisation strength; None picks it by CV on train.
    max_word_features: cap on word n-gram terms.
    max_char_features: cap on character n-gram terms.

  Returns:
    The eval AUC, the C used, the CV scores, the feature count and the
    seconds spent selecting C and fitting the final model.
  """
  labels = train[LABEL_COLUMN].to_numpy()
  start = time.perf_counter()
  vectorizer = make_vectorizer(max_word_features, max_char_features)
  features = vectorizer.fit_transform(train[TEXT_COLUMN])
  featurize_seconds = time.perf_counter() - start

  cv_scores: Dict[str, float] = {}
  select_start = time.perf_counter()
  if c is None:
    c, cv_scores = choose_c(features, labels)
  select_seconds = time.perf_counter() - select_start

  fit_start = time.perf_counter()
  model = _classifier(c).fit(features, labels)
  fit_seconds = time.perf_counter() - fit_start
  probabilities = model.predict_proba(
      vectorizer.transform(evaluation[TEXT_COLUMN]))[:, 1]
  return {
      'auc': round(float(metrics.roc_auc_score(
          evaluation[LABEL_COLUMN], probabilities)), 4),
      'c': c,
      'cv_auc_by_c': cv_scores,
      'features': int(features.shape[1]),
      # Vectorising plus fitting the final model: what "training" costs once
      # the settings are known, comparable with the pipeline's Trainer.
      'train_seconds': round(featurize_seconds + fit_seconds, 1),
      'c_selection_seconds': round(select_seconds, 1),
  }
