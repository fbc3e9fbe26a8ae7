"""Model execution backends behind one interface (see ``base.Backend``)."""
