"""helpers: the thin package behind the kit's notebooks (see README.md and docs/)."""

import warnings

# Without ipywidgets tqdm.auto falls back to text bars (what the kit wants under Papermill) and warns, quoting the
# absolute path of its own file: that line would end up in every executed notebook.
warnings.filterwarnings("ignore", message="IProgress not found")

__version__ = "0.1.0"
