"""Session events: the catalogue that declares every type (`catalogue`), reading them (`read`), and the
bodies the Python side builds (`build`)."""
