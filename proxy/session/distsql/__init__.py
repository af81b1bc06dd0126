"""DistSQL: `grammar` recognises it, `handler` answers RQL and RAL, `rdl` changes rules and storage units
(with `definitions` for the rule syntax), `rules` builds RQL rows, `variables`, `export`, `targets`."""
