"""The command-line option that gives each input of a file report
(``metrics-gpu report``): the name the file readers' errors and the report's
HTML page use for an input, on the floor both read from."""

OPTIONS = {"y_true": "--y-true", "y_pred": "--y-pred", "scores": "--scores",
           "sample_weight": "--sample-weight", "groups": "--groups"}
