"""Session events: the catalogue that declares every type (`catalogue`), reading them (`read`), the bodies
the Python side builds (`build`), the byte marks that pick them out of a stream (`marks`), and the writer of
every copy derived from the catalogue (`generate`)."""
