"""Self-contained HTML reports (plots inlined as SVG) shared by every command."""
