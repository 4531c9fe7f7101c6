"""Issue 42's new cases, tried on data aflite was not developed against (MNLI dev_matched, HANS) and on odd files
made here; each prints what happened (a result, or the one-line error). docs/measured/trust5_cases.md lists them.

Run from the repository root: python docs/measured/trust5_cases.py ../shared/data [case numbers...]
(work files go to ./trust5_work, removed first)."""
import csv, gzip, io, json, os, shutil, subprocess, sys, traceback
from pathlib import Path
import numpy as np, pandas as pd, pyarrow as pa, pyarrow.parquet as pq
import aflite
from aflite import AuditConfig, audit_file, evaluate_runs, explain_run, write_card
from aflite.evaluate import load_hans

SHARED = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("../shared/data")
H = SHARED / "hans" / "evaluation_regenerated.tsv.gz"
M = SHARED / "mnli" / "dev_matched.tsv.gz"
KW = dict(show_progress=False, probe=False, params={"n_partitions": 16}, featurizer_options={"n_components": 64})
FAST = {"tokens": {"min_count": 5, "random_seeds": 1}, "surrogate": {"min_count": 5}, "ngram_coefficients": {"min_count": 5}, "label_issues": {"permutations": 1}, "neighbours": {"k": 0}}  # explain: cheap
mnli = pd.read_csv(M, sep="\t", quoting=3, keep_default_na=False, dtype=str).head(400)
hans = pd.read_csv(H, sep="\t", quoting=3, keep_default_na=False, dtype=str).sample(400, random_state=0)
W = Path("trust5_work"); shutil.rmtree(W, ignore_errors=True); W.mkdir()
mnli.to_csv(W/"mnli400.tsv", sep="\t", index=False, quoting=3)

def tree(p):
    p = Path(p)
    return sorted(str(q.relative_to(p)) for q in p.rglob("*")) if p.exists() else None

def case(name, fn):
    print(f"--- {name}")
    try:
        r = fn()
        print("  result:", r if not hasattr(r, "summary") else f"{type(r).__name__} kept {r.summary.get('size_after')} of {r.summary.get('size_before')}")
    except Exception as e:
        print(f"  raised {type(e).__name__}: {str(e).splitlines()[0][:400]}" + (" [multi-line]" if "\n" in str(e) else ""))
        if not isinstance(e, aflite.AfliteError):
            traceback.print_exc(limit=3)

def cli(*argv):
    p = subprocess.run([sys.executable, "-m", "aflite", *map(str, argv)], capture_output=True, text=True)
    err = [l for l in p.stderr.splitlines() if l.strip()]
    return f"exit {p.returncode}; stderr last: {err[-1][:300] if err else ''} ({len(err)} lines)"

sel = sys.argv[2:] or None
def want(n): return sel is None or n in sel
if want("1"):
    case("N1 MNLI dev DataFrame (400 rows), id column, out=None", lambda: aflite.run(mnli, **KW))
if want("2"):
    hans.to_csv(W/"hans400.tsv", sep="\t", index=False, quoting=3)
    case("N2 HANS sample via CLI aflite run", lambda: cli("run", W/"hans400.tsv", "--out", W/"o2", "--quiet") + f"; files {tree(W/'o2')}")
if want("3"):
    h = hans.copy(); h["label"] = h["label"].astype("category")
    case("N3 HANS DataFrame, label a pandas Categorical", lambda: aflite.run(h, **KW))
if want("4"):
    m = mnli.copy(); m.loc[10, "hypothesis"] = np.nan; m = m.astype(object); m.loc[10, "hypothesis"] = float("nan")
    case("N4 MNLI DataFrame with NaN text", lambda: aflite.run(m, **KW))
if want("5"):
    m = mnli.copy().astype({"label": "string"}); m.loc[12, "label"] = pd.NA
    case("N5 MNLI DataFrame with pd.NA label (string dtype)", lambda: aflite.run(m, **KW))
if want("6"):
    m = mnli.set_index("id"); m.index = [*m.index[:20], m.index[0], *m.index[21:]]
    case("N6 DataFrame index with a duplicate id", lambda: aflite.run(m, **KW))
if want("7"):
    p = W/"bom.csv"; mnli.to_csv(p, index=False, encoding="utf-8-sig")
    case("N7 CSV with a UTF-8 BOM (pandas utf-8-sig)", lambda: aflite.run(p, W/"o7", **KW))
if want("8"):
    p = W/"crlf.csv"; m = mnli.copy(); m.loc[3, "premise"] = 'He said "hi,\nthere" and left'
    m.to_csv(p, index=False, lineterminator="\r\n")
    case("N8 CSV with CRLF and a quoted field holding a newline", lambda: (aflite.run(p, W/"o8", **KW), (W/"o8"/"filtered.csv").read_bytes()[:0] == b"", open(p,"rb").read().count(b"\r\n"), (W/"o8"/"filtered.csv").read_bytes().count(b"\r\n"))[1:])
if want("9"):
    p = W/"latin1.csv"; m = mnli.copy(); m.loc[30, "premise"] = "Caf\u00e9 au lait"
    m.to_csv(p, index=False, encoding="latin-1", errors="replace")
    case("N9 CSV saved as Latin-1 (an é byte 0xE9)", lambda: aflite.run(p, W/"o9", **KW))
    print("  folder:", tree(W/"o9"))
if want("10"):
    p = W/"ragged.tsv"; lines = ["id\tpremise\thypothesis\tlabel"] + ["\t".join(r) for r in mnli.values.tolist()]
    lines[41] = lines[41] + "\textra"; p.write_text("\n".join(lines) + "\n")
    case("N10 TSV with a row of 5 fields", lambda: aflite.run(p, W/"o10", **KW))
if want("11"):
    p = W/"odd.jsonl"
    rows = [json.dumps({"id": r["id"], "premise": r["premise"], "hypothesis": r["hypothesis"], "label": r["label"]}) for r in mnli.to_dict("records")]
    rows.insert(50, "null")
    p.write_text("\n".join(rows) + "\n\n")
    case("N11 JSONL with a 'null' line and a trailing blank line", lambda: aflite.run(p, W/"o11", **KW))
    print("  folder:", tree(W/"o11"))
if want("12"):
    from datasets import Dataset, load_from_disk
    Dataset.from_pandas(mnli).save_to_disk(str(W/"hf_mnli"))
    before = tree(W/"hf_mnli")
    ds = load_from_disk(str(W/"hf_mnli"))
    case("N12 datasets.Dataset from load_from_disk, out=None", lambda: len(aflite.run(ds, **KW).filtered))
    print("  input folder changed:", tree(W/"hf_mnli") != before, sorted(set(tree(W/"hf_mnli")) - set(before)))
if want("13"):
    before = tree(W/"hf_mnli")
    case("N13 the saved HF folder via CLI run", lambda: cli("run", W/"hf_mnli", "--out", W/"o13", "--quiet") + f"; out {tree(W/'o13')[:12]}")
    print("  input folder changed:", tree(W/"hf_mnli") != before, sorted(set(tree(W/"hf_mnli")) - set(before)))
if want("14"):
    t = pa.Table.from_pandas(hans, preserve_index=False)
    t = t.set_column(t.schema.get_field_index("label"), "label", pa.compute.dictionary_encode(t.column("label")))
    t = t.set_column(t.schema.get_field_index("premise"), "premise", t.column("premise").cast(pa.large_string()))
    case("N14 pyarrow Table, dictionary label + large_string text, out=DIR", lambda: (lambda r: (r.filtered.schema == t.schema, r.filtered.num_rows))(aflite.run(t, W/"o14", **KW)))
if want("15"):
    m = mnli.copy(); m.columns = pd.MultiIndex.from_tuples([("a", c) for c in m.columns])
    case("N15 DataFrame with MultiIndex columns", lambda: aflite.run(m, **KW))
if want("16"):
    m = mnli.copy(); m["label"] = (m["label"] == "entailment")
    case("N16 DataFrame with bool labels", lambda: aflite.run(m, **KW).summary["label_counts_before"])
if want("17"):
    m = mnli.copy(); m.loc[[5, 9, 33], "label"] = "entailment "
    case("N17 labels 'entailment' and 'entailment ' (trailing space)", lambda: aflite.run(m, **KW).summary["label_counts_before"])
if want("18"):
    m = mnli.copy(); m["id"] = [float(i) for i in range(len(m))]
    case("N18 DataFrame id column of floats 0.0, 1.0, ...", lambda: list(aflite.run(m, **KW).scores["id"][:3]))
if want("19"):
    p = W/"nul.tsv"; m = mnli.copy(); m.loc[7, "hypothesis"] = "a\x00b"
    m.to_csv(p, sep="\t", index=False, quoting=3)
    case("N19 TSV with a NUL byte inside a text", lambda: aflite.run(p, W/"o19", **KW))
    print("  folder:", tree(W/"o19"))
if want("20"):
    m = mnli.copy(); m.loc[4, "premise"] = "\u05e9\u05dc\u05d5\u05dd \U0001F468\u200d\U0001F469\u200d\U0001F467 \u202eabc"
    case("N20 RTL, ZWJ emoji and a bidi override in a text, out=DIR + summary", lambda: aflite.run(m, W/"o20", **KW))
if want("21"):
    aflite.run(W/"mnli400.tsv", W/"r21", **KW)
    back = pd.read_csv(W/"mnli400.tsv", sep="\t", quoting=3, keep_default_na=False, dtype=str)
    case("N21 explain an MNLI file run from the DataFrame of that file", lambda: explain_run(back, W/"r21", W/"x21", show_progress=False, checks=FAST).results["first_phase"]["agreement_with_run"])
if want("22"):
    case("N22 evaluate the MNLI run with a 500-row HANS sample as eval set", lambda: evaluate_runs(W/"mnli400.tsv", [W/"r21"], W/"e22", models=["ngram"], seeds=1, eval_sets=[load_hans(H, max_rows=500)], show_progress=False).verdict[:1])
    print("  tables mention HANS:", "HANS" in (W/"e22"/"summary.md").read_text())
if want("23"):
    t = pa.Table.from_pandas(hans, preserve_index=False)
    aflite.run(t, W/"r23", **KW)
    case("N23 card of an in-memory Table run, license 'CC-BY-4.0 ' (case, space)", lambda: (lambda c: (c.license, c.manifest["input"]["in_memory"], "Parquet, from the in-memory data" in c.readme.read_text()))(write_card(W/"r23", W/"card23", license="CC-BY-4.0 ")))
if want("24"):
    shutil.copy(W/"mnli400.tsv", W/"moved.tsv"); aflite.run(W/"moved.tsv", W/"r24", **KW); os.remove(W/"moved.tsv")
    case("N24 aflite report on a file run whose data file was moved away", lambda: cli("report", W/"r24"))
if want("25"):
    case("N25 audit a HANS DataFrame (2 labels), ngram, no TRA", lambda: [ (r.name, r.n) for r in audit_file(hans, W/"a25", AuditConfig(featurizer="ngram", tra=False, peco_shuffles=2, tsne_sample=100), show_progress=False).results])
if want("26"):
    aflite.run(hans, W/"r26", **KW)
    case("N26 explain a HANS in-memory run (2 labels)", lambda: explain_run(hans, W/"r26", W/"x26", show_progress=False, checks=FAST).results["verdict"][:1])
if want("27"):
    m = mnli.copy().astype(object); m.loc[2, "premise"] = b"bytes text"
    case("N27 DataFrame with a bytes cell in the text", lambda: aflite.run(m, **KW))
if want("28"):
    h = hans.copy(); h["label"] = (h["label"] == "entailment").astype(int)
    case("N28 int labels with a label_map missing one of them", lambda: aflite.run(h, dataset_options={"label_map": {1: "entailment"}}, **KW))
if want("29"):
    case("N29 evaluate with the same run folder twice", lambda: evaluate_runs(W/"mnli400.tsv", [W/"r21", W/"r21"], W/"e29", models=["ngram"], seeds=1, show_progress=False).config["runs"])
if want("30"):
    case("N30 HANS run grouped by its 'heuristic' column (groups=)", lambda: aflite.run(hans, groups="heuristic", **KW).summary["groups"])
if want("31"):
    m = mnli.copy(); m.columns = pd.MultiIndex.from_tuples([("a", c) for c in m.columns])
    case("N31 MultiIndex columns named by tuple", lambda: len(aflite.run(m, dataset_options={"text_a": ("a", "premise"), "text_b": ("a", "hypothesis"), "label": ("a", "label"), "id_column": ("a", "id")}, **KW).filtered))
if want("32"):
    p = W/"dup.csv"; p.write_text("premise,premise,label\n" + "".join(f"a{i},b{i},{'xy'[i%2]}\n" for i in range(20)))
    case("N32 CLI run on a CSV with two columns named 'premise'", lambda: cli("run", p, "--out", W/"o32", "--quiet") + f"; out {tree(W/'o32')}")
if want("33"):
    raw = gzip.decompress(M.read_bytes())[:200_000]
    p = W/"trunc.tsv.gz"; p.write_bytes(gzip.compress(raw)[:-2000])
    case("N33 CLI run on a truncated .tsv.gz (MNLI dev)", lambda: cli("run", p, "--out", W/"o33", "--quiet") + f"; out {tree(W/'o33')}")
if want("34"):
    case("N34 an empty DataFrame with the right columns", lambda: aflite.run(mnli.head(0), **KW))
if want("35"):
    m = mnli.copy(); m["meta"] = [{"k": i, "v": [i, i + 1]} for i in range(len(m))]
    case("N35 DataFrame with a dict column besides the texts, out=DIR", lambda: (lambda r: (len(r.filtered), list(pd.read_parquet(W/'o35'/'filtered.parquet')['meta'][:1])))(aflite.run(m, W/"o35", **KW)))
if want("36"):
    m = mnli.copy(); m.loc[m.index[::2], "label"] = m.loc[m.index[::2], "label"].str.upper()
    case("N36 labels in two cases ('neutral' and 'NEUTRAL')", lambda: aflite.run(m, **KW).summary["label_counts_before"])
if want("37"):
    case("N37 run(df, out=DIR) then run(df, out=DIR) again without overwrite", lambda: (aflite.run(mnli, W/"o37", **KW), aflite.run(mnli, W/"o37", **KW)))
if want("38"):
    case("N38 write_card of an in-memory run with license=None, then with a path-like license", lambda: write_card(W/"o37", W/"card38", license=Path("mit")))
