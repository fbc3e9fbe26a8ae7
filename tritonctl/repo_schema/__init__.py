"""The model repository as data: config parsing with positions, rules, diagnostics."""
