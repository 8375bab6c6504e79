"""Tests of the CSV preflight check (pure Python; no TensorFlow).

Over 300 lines: one short test per way a CSV can be bad, each with its exact
message; they read best as one list.
"""

import os
import re

import pytest

from tfx_autostrategy import conventions
from tfx_autostrategy.preflight import csv_check
from tfx_autostrategy.preflight import csv_layout
from tfx_autostrategy import sample_data

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)),
                        'testdata', 'csv')
HEADER = 'id,comment_text,toxic,lang\n'


def write(directory, name, text, encoding='utf-8'):
  """Writes `text` (str or bytes) to directory/name; returns the path."""
  path = os.path.join(str(directory), name)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  data = text if isinstance(text, bytes) else text.encode(encoding)
  with open(path, 'wb') as f:
    f.write(data)
  return path


def test_good_single_file_report():
  root = os.path.join(TESTDATA, 'single')
  report = csv_check.check_csv_dir(root)
  assert report.layout == csv_layout.SINGLE
  assert report.files == {'single_split': [os.path.join(root, 'comments.csv')]}
  assert report.columns == ['id', 'comment_text', 'toxic', 'lang']
  assert report.rows == {'single_split': 7}
  assert report.total_rows == 7
  assert report.label_counts == {'single_split': {0: 5, 1: 2}}
  # One empty and one whitespace-only text: valid, counted.
  assert report.empty_text == {'single_split': 2}
  assert report.has_lang is True
  assert report.id_is_int is False
  assert report.invalid_utf8_rows == 0
  assert report.warnings == []


def test_presplit_layout_detected():
  root = os.path.join(TESTDATA, 'presplit')
  report = csv_check.check_csv_dir(root)
  assert report.layout == csv_layout.PRESPLIT
  assert [os.path.basename(p) for p in report.files['train']] == [
      'part-0.csv', 'part-1.csv']
  assert report.rows == {'train': 5, 'eval': 2}
  assert report.label_counts == {'train': {0: 3, 1: 2}, 'eval': {0: 1, 1: 1}}
  assert report.id_is_int is True


def test_input_patterns_of_the_two_layouts():
  assert conventions.input_patterns(presplit=False) == {
      'single_split': '*.csv'}
  assert conventions.input_patterns(presplit=True) == {
      'train': 'train/*.csv', 'eval': 'eval/*.csv'}


def test_generated_data_passes_with_exact_counts(tmp_path):
  rows = list(sample_data.generate(500, seed=5))
  sample_data.write_dataset(str(tmp_path), rows)
  report = csv_check.check_csv_dir(str(tmp_path))
  positives = sum(r['toxic'] for r in rows)
  assert report.rows == {'single_split': 500}
  assert report.label_counts == {
      'single_split': {0: 500 - positives, 1: positives}}
  assert report.empty_text == {
      'single_split': sum(not r['comment_text'].strip() for r in rows)}
  assert report.warnings == []


def test_100k_presplit_rows_are_all_counted(tmp_path):
  # Its speed is a benchmark figure (`python -m bench.suite --only preflight`).
  rows = list(sample_data.generate(100_000))
  sample_data.write_dataset(str(tmp_path), rows, split=True)
  report = csv_check.check_csv_dir(str(tmp_path))
  assert report.total_rows == 100_000
  assert set(report.rows) == {'train', 'eval'}
  assert report.rows['train'] + report.rows['eval'] == 100_000
  positives = sum(r['toxic'] for r in rows)
  assert sum(counts[1] for counts in report.label_counts.values()) == positives


def test_no_csv_files_names_the_directory(tmp_path):
  write(tmp_path, 'notes.txt', 'hello')
  with pytest.raises(csv_layout.CsvDataError,
                     match=rf'^{re.escape(str(tmp_path))}: no CSV files found'):
    csv_check.check_csv_dir(str(tmp_path))


def test_upper_case_extension_gets_a_hint(tmp_path):
  write(tmp_path, 'DATA.CSV', HEADER + 'a,b,0,en\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r'DATA\.CSV does not match'):
    csv_check.check_csv_dir(str(tmp_path))


def test_missing_directory(tmp_path):
  with pytest.raises(csv_layout.CsvDataError, match='does not exist'):
    csv_check.check_csv_dir(str(tmp_path / 'nope'))


def test_split_without_files_is_named(tmp_path):
  write(tmp_path, 'train/a.csv', HEADER + 'a,b,0,en\n')
  os.makedirs(tmp_path / 'eval')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r"eval: split 'eval' has no CSV files"):
    csv_check.check_csv_dir(str(tmp_path))


def test_split_without_rows_is_named(tmp_path):
  write(tmp_path, 'train/a.csv', HEADER + 'a,b,0,en\n')
  write(tmp_path, 'eval/b.csv', HEADER)
  with pytest.raises(csv_layout.CsvDataError,
                     match=r"split 'eval' has no data rows \(files: b\.csv\)"):
    csv_check.check_csv_dir(str(tmp_path))


def test_both_layouts_at_once_is_ambiguous(tmp_path):
  write(tmp_path, 'all.csv', HEADER + 'a,b,0,en\n')
  write(tmp_path, 'train/a.csv', HEADER + 'a,b,0,en\n')
  with pytest.raises(csv_layout.CsvDataError, match='ambiguous layout'):
    csv_check.check_csv_dir(str(tmp_path))


def test_missing_text_column_names_file_column_and_columns(tmp_path):
  path = write(tmp_path, 'a.csv', 'id,text,toxic\na,b,0\n')
  with pytest.raises(
      csv_layout.CsvDataError,
      match=(rf"^{re.escape(path)}:1: header has no text column "
             r"'comment_text' \(columns found: \['id', 'text', 'toxic'\]\)")):
    csv_check.check_csv_dir(str(tmp_path))


def test_missing_label_column(tmp_path):
  write(tmp_path, 'a.csv', 'id,comment_text,label\na,b,0\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r"a\.csv:1: header has no label column 'toxic'"):
    csv_check.check_csv_dir(str(tmp_path))


def test_custom_column_names_are_accepted(tmp_path):
  write(tmp_path, 'a.csv', 'body,label\nhello,1\nbye,0\n')
  report = csv_check.check_csv_dir(str(tmp_path), text_column='body',
                                   label_column='label')
  assert report.label_counts == {'single_split': {0: 1, 1: 1}}
  assert report.has_lang is False
  assert report.id_is_int is False
  assert report.warnings == [
      "no id column 'id' (columns: ['body', 'label']); pass --id-column '' "
      'if the data has none']


def test_padded_column_name_gets_a_hint(tmp_path):
  write(tmp_path, 'a.csv', 'id, comment_text,toxic\na,b,0\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r"' comment_text' has surrounding spaces"):
    csv_check.check_csv_dir(str(tmp_path))


@pytest.mark.parametrize('header, message', [
    ('"id","comment_text","toxic"\n', r'a\.csv:1: header .* is quoted'),
    ('id,comment_text,toxic,id\n',
     r"a\.csv:1: duplicate column names \['id'\]"),
    ('\ufeffid,comment_text,toxic\n', r'a\.csv:1: .*byte-order mark'),
    ('', r'a\.csv:1: no header line'),
])
def test_bad_headers(tmp_path, header, message):
  write(tmp_path, 'a.csv', header + ('a,b,0\n' if header else ''))
  with pytest.raises(csv_layout.CsvDataError, match=message):
    csv_check.check_csv_dir(str(tmp_path))


def test_different_headers_name_both_files(tmp_path):
  write(tmp_path, 'train/a.csv', HEADER + 'a,b,0,en\n')
  write(tmp_path, 'eval/b.csv', 'id,comment_text,toxic\nc,d,1\n')
  with pytest.raises(
      csv_layout.CsvDataError,
      match=(r"eval/b\.csv:1: header \['id', 'comment_text', 'toxic'\] "
             r'differs from the header of .*train/a\.csv: ')):
    csv_check.check_csv_dir(str(tmp_path))


def test_wrong_field_count_names_line_and_counts(tmp_path):
  path = write(tmp_path, 'a.csv', HEADER + 'a,fine,0,en\nb,"multi\nline",0,en\n'
               'c,no, quotes,1,en\n')
  with pytest.raises(
      csv_layout.CsvDataError,
      match=(rf'^{re.escape(path)}:5: expected 4 fields \(id, comment_text, '
             r"toxic, lang\), found 5: 'c,no, quotes,1,en'$")):
    csv_check.check_csv_dir(str(tmp_path))


def test_unbalanced_quote_at_end_of_file(tmp_path):
  write(tmp_path, 'a.csv', HEADER + 'a,fine,0,en\nb,"never closed,1,en\n'
        'c,more,0,en\n')
  with pytest.raises(
      csv_layout.CsvDataError,
      match=(r'a\.csv:3: unbalanced quote: a quoted field opens on this line '
             r'and is still open at the end of the file \(line 4\)')):
    csv_check.check_csv_dir(str(tmp_path))


def test_stray_quote_that_swallows_records_silently(tmp_path):
  # The csv module reads lines 3-5 as one record with the right number of
  # fields; rows b2 and b3 would vanish into b1's text.
  write(tmp_path, 'a.csv', HEADER + 'a,fine,0,en\n'
        'b1,"oops,0,en\nb2,swallowed,1,en\nb3,end",1,en\nc,fine,0,en\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r'a\.csv:3: unbalanced quote: this line is a '
                     r"complete record except for a '\"' that runs on to "
                     r'line 5'):
    csv_check.check_csv_dir(str(tmp_path))


def test_swallowed_middle_line_is_reported(tmp_path):
  write(tmp_path, 'a.csv', HEADER +
        'b1,"starts a long comment\nb2,swallowed,1,en\nb3,end",1,en\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r'a\.csv:2: unbalanced quote: a quoted field that '
                     r'opens on this line swallows line 3'):
    csv_check.check_csv_dir(str(tmp_path))


def test_stray_quote_inside_unquoted_field(tmp_path):
  # CsvExampleGen joins lines until the quote count is even; the joined text
  # is not valid CSV.
  write(tmp_path, 'a.csv', HEADER + 'a,a 5" screen,0,en\nb,ok,1,en\n'
        'c,another 6" one,0,en\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r'a\.csv:2: unbalanced quote: .* joins lines 2-4 '
                     r'into one record that is not valid CSV \(new-line '
                     r'character seen in unquoted field\): '):
    csv_check.check_csv_dir(str(tmp_path))


def test_multi_line_record_with_wrong_field_count(tmp_path):
  write(tmp_path, 'a.csv', HEADER + 'a,"two\nlines",0\n')
  with pytest.raises(csv_layout.CsvDataError,
                     match=r'a\.csv:2: expected 4 fields .*, found 3 in a '
                     r'record spanning lines 2-3'):
    csv_check.check_csv_dir(str(tmp_path))


def test_bad_labels_are_counted_with_first_location(tmp_path):
  write(tmp_path, 'train/a.csv', HEADER + 'a,x,0,en\nb,x,2,en\nc,x,2,en\n'
        'd,x,yes,en\n')
  write(tmp_path, 'eval/b.csv', HEADER + 'e,x,1,en\nf,x,-1,en\ng,x,2,en\n'
        'h,x,,en\n')
  with pytest.raises(csv_layout.CsvDataError) as raised:
    csv_check.check_csv_dir(str(tmp_path))
  message = str(raised.value)
  assert re.match(r"^\S*train/a\.csv:3: label column 'toxic' has values "
                  r'outside \{0, 1\}: ', message), message
  assert "'2' in 3 rows (first at " in message
  assert re.search(r"'yes' in 1 row \(first at \S*train/a\.csv:5\)", message)
  assert re.search(r"'-1' in 1 row \(first at \S*eval/b\.csv:3\)", message)
  assert re.search(r"'' \(empty\) in 1 row \(first at \S*eval/b\.csv:5\)",
                   message)


def test_float_spelled_label_is_rejected(tmp_path):
  write(tmp_path, 'a.csv', HEADER + 'a,x,1.0,en\nb,x,0,en\n')
  with pytest.raises(csv_layout.CsvDataError, match=r"'1\.0' in 1 row"):
    csv_check.check_csv_dir(str(tmp_path))


def test_other_allowed_labels(tmp_path):
  write(tmp_path, 'a.csv', HEADER + 'a,x,0,en\nb,x,2,en\n')
  report = csv_check.check_csv_dir(str(tmp_path), allowed_labels=(0, 1, 2))
  assert report.label_counts == {'single_split': {0: 1, 2: 1}}
  assert report.warnings == [
      "split 'single_split' has no rows with label 1; AUC is undefined there"]


def test_single_layout_with_one_label_is_rejected(tmp_path):
  # All rows are the training data: the hash split cannot add a class.
  write(tmp_path, 'a.csv', HEADER + 'a,x,0,en\nb,y,0,fr\n')
  write(tmp_path, 'b.csv', HEADER + 'c,z,0,en\n')
  with pytest.raises(csv_layout.CsvDataError) as raised:
    csv_check.check_csv_dir(str(tmp_path))
  assert str(raised.value) == (
      f"{tmp_path}: the training data has only label 0 in column 'toxic' "
      '(3 rows); a classifier needs rows of both labels 0 and 1')


def test_presplit_train_with_one_label_is_rejected_naming_the_column(
    tmp_path):
  write(tmp_path, 'train/a.csv', 'id,body,y\na,x,1\nb,y,1\n')
  write(tmp_path, 'eval/a.csv', 'id,body,y\nc,x,0\nd,y,1\n')
  with pytest.raises(csv_layout.CsvDataError) as raised:
    csv_check.check_csv_dir(str(tmp_path), text_column='body',
                            label_column='y')
  assert str(raised.value) == (
      f"{tmp_path / 'train'}: the training data has only label 1 in column "
      "'y' (2 rows); a classifier needs rows of both labels 0 and 1")


def test_bad_label_values_are_reported_before_one_class(tmp_path):
  write(tmp_path, 'a.csv', HEADER + 'a,x,0,en\nb,y,yes,fr\n')
  with pytest.raises(csv_layout.CsvDataError, match=r"outside \{0, 1\}"):
    csv_check.check_csv_dir(str(tmp_path))


def test_presplit_eval_with_one_label_is_a_warning(tmp_path):
  write(tmp_path, 'train/a.csv', HEADER + 'a,x,0,en\nb,y,1,fr\n')
  write(tmp_path, 'eval/a.csv', HEADER + 'c,x,0,en\nd,y,0,fr\n')
  report = csv_check.check_csv_dir(str(tmp_path))
  assert report.label_counts == {'train': {0: 1, 1: 1}, 'eval': {0: 2}}
  assert report.warnings == [
      "split 'eval' has no rows with label 1; AUC is undefined there, so the "
      'model will not be blessed and nothing will be pushed']


def test_non_utf8_is_rejected_by_default_with_byte_offset(tmp_path):
  content = (HEADER + 'a,caf\u00e9,0,en\n').encode('utf-8')
  offset = len(content) + len(b'b,caf')
  write(tmp_path, 'a.csv', content + 'b,caf\u00e9,1,fr\n'.encode('latin-1'))
  with pytest.raises(
      csv_layout.CsvDataError,
      match=(rf'a\.csv:3: invalid UTF-8 byte 0xe9 at byte offset {offset} '
             r".*encoding_errors='replace'")):
    csv_check.check_csv_dir(str(tmp_path))


def test_non_utf8_replace_mode_counts_rows_and_warns(tmp_path):
  write(tmp_path, 'a.csv', HEADER.encode() + b'a,ok,0,en\n'
        b'b,caf\xe9,1,fr\nc,"multi\nline \xff",0,fr\n')
  report = csv_check.check_csv_dir(str(tmp_path), encoding_errors='replace')
  assert report.rows == {'single_split': 3}
  assert report.invalid_utf8_rows == 2
  assert len(report.warnings) == 1
  assert re.match(r'2 rows contain bytes that are not UTF-8 \(first at '
                  r'\S*a\.csv:3, byte offset 42\); .*re-encode',
                  report.warnings[0]), report.warnings


def test_invalid_encoding_errors_value():
  with pytest.raises(ValueError, match='encoding_errors must be one of'):
    csv_check.check_csv_dir(TESTDATA, encoding_errors='ignore')


def test_blank_lines_and_crlf_are_accepted(tmp_path):
  write(tmp_path, 'a.csv', 'id,comment_text,toxic\r\n1,hi,0\r\n\r\n'
        '2,"two\r\nlines",1\r\n')
  report = csv_check.check_csv_dir(str(tmp_path))
  assert report.rows == {'single_split': 2}
  assert report.id_is_int is True
  assert report.warnings == ['1 blank lines are skipped']


def test_id_types_differing_between_splits_warn(tmp_path):
  write(tmp_path, 'train/a.csv', HEADER + '1,x,0,en\n2,y,1,en\n')
  write(tmp_path, 'eval/b.csv', HEADER + 'ab,x,0,en\n,y,1,en\n')
  report = csv_check.check_csv_dir(str(tmp_path))
  assert report.id_is_int is False
  assert report.warnings == [
      "1 rows have an empty 'id'",
      "'id' values are integers in split 'train', strings in split 'eval'; "
      'CsvExampleGen types each split on its own']
