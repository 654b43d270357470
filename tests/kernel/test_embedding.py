"""The real ONNX embedder (all-MiniLM-L6-v2 installed by `ragstack models install`)."""

from __future__ import annotations

import numpy as np
import pytest

from ragstack.errors import ModelMissing
from ragstack.onnx import pick_providers


def test_unit_vectors_in_input_order(embedder) -> None:
    texts = [
        "short",
        "a considerably longer sentence about dense retrieval and cosine similarity",
        "mid size text",
    ]
    together = embedder.embed(texts)
    assert together.shape == (3, 384) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-4)
    one_by_one = np.stack([embedder.embed([t])[0] for t in texts])
    # Batching sorts by length and pads: results must not depend on it.
    assert np.allclose(together, one_by_one, atol=1e-5)


def test_meaning_is_captured(embedder) -> None:
    a, b, c = embedder.embed(
        [
            "How do I install the package?",
            "Installation instructions for the library",
            "The cat slept on the warm windowsill",
        ]
    )
    assert a @ b > a @ c + 0.2


def test_chunk_sizes_are_counted_past_the_models_limit(embedder) -> None:
    # The model reads 256 word pieces; the chunker must see a long text's real size to cut it.
    assert embedder.count_tokens("word " * 700) == 700
    assert embedder.count_tokens("") == 0
    long = embedder.embed(["word " * 700])  # still truncated for the model itself
    assert long.shape == (1, 384)


def test_providers() -> None:
    assert pick_providers("auto", ["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    assert (
        pick_providers("auto", ["CUDAExecutionProvider", "CPUExecutionProvider"])[0]
        == "CUDAExecutionProvider"
    )
    assert pick_providers("cpu", ["CUDAExecutionProvider"]) == ["CPUExecutionProvider"]
    with pytest.raises(ModelMissing):
        pick_providers("cuda", ["CPUExecutionProvider"])


def test_missing_model_says_how_to_get_it(tmp_path) -> None:
    from ragstack.embedding import Embedder

    with pytest.raises(ModelMissing, match="ragstack models install"):
        Embedder(tmp_path)


TEXTS = [
    "Which enzyme breaks down lactose in the small intestine?",
    "How does reciprocal rank fusion combine two rankings",
    "tariffs on imported steel in 2018",
]


def test_search_queries_use_the_int8_weights_installed_beside_the_model(resources) -> None:
    queries = resources.query_embedder
    assert queries is not resources.embedder and queries.name.endswith("model.int8.onnx")
    agreement = (queries.embed(TEXTS) * resources.embedder.embed(TEXTS)).sum(axis=1)
    assert agreement.min() > 0.95  # the same model: documents' fp32 vectors still match


def test_search_queries_run_on_the_configured_intra_op_threads(tmp_path, resources) -> None:
    from ragstack.resources import Resources
    from tests.conftest import make_config

    def threads(res: Resources) -> int:
        return int(res.query_embedder._model.session.get_session_options().intra_op_num_threads)

    assert threads(resources) == 2  # models.query_threads' default
    one = Resources(make_config(tmp_path, models={"query_threads": 1}))
    one.__dict__["embedder"] = resources.embedder
    assert threads(one) == 1 and one.query_embedder._model.lanes is None  # one thread: one lane
    same = one.query_embedder.embed(TEXTS) * resources.query_embedder.embed(TEXTS)
    assert same.sum(axis=1).min() > 0.9999  # threads change the speed, not the vectors


def test_a_query_vector_does_not_depend_on_the_queries_batched_with_it(resources) -> None:
    # The retrieve service embeds concurrent searches together. int8 weights come with activations
    # scaled over the whole batch, so unless each query runs alone its hits would depend on other
    # callers' queries: not reproducible, and a trace would not replay.
    queries, documents = resources.query_embedder, resources.embedder
    assert queries._model.rows_alone and not documents._model.rows_alone
    others = ["x", "a far longer query about the half-life of caffeine in adults who drink coffee daily"]
    for model, rounding in ((queries, 0.0), (documents, 1e-6)):  # fp32: padding reorders sums
        alone = np.stack([model.embed([t])[0] for t in TEXTS])
        beside = model.embed([*TEXTS, *others])[: len(TEXTS)]
        assert np.abs(alone - beside).max() <= rounding


def test_fp32_queries_or_a_model_without_int8_weights_use_the_embedder(
    tmp_path, resources, caplog: pytest.LogCaptureFixture
) -> None:
    from ragstack.resources import Resources
    from tests.conftest import MODEL_DIR, make_config

    fp32 = Resources(make_config(tmp_path / "a", retrieve={"query_precision": "fp32"}))
    fp32.__dict__["embedder"] = resources.embedder
    assert fp32.query_embedder is resources.embedder

    older = tmp_path / "older-install"
    older.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        (older / name).symlink_to(MODEL_DIR / name)
    res = Resources(make_config(tmp_path / "b", models={"embedder_dir": str(older)}))
    res.__dict__["embedder"] = resources.embedder
    assert res.query_embedder is resources.embedder
    assert "has no model.int8.onnx" in caplog.text and "ragstack models install" in caplog.text


def test_bench_embed_reports_that_batching_leaves_query_vectors_alone(tmp_path) -> None:
    from ragstack.bench.embed import bench_embed
    from tests.conftest import make_config

    report = bench_embed(make_config(tmp_path), [*TEXTS, "x", "a much longer query " * 6], [])
    queries = report["onnxruntime_query_model"]
    assert queries["model"].endswith("model.int8.onnx")
    assert queries["cosine_alone_vs_batched_min"] == 1.0
    assert 0.95 < queries["cosine_to_fp32_min"] < 1.0


def test_a_model_that_refuses_two_rows_runs_them_one_at_a_time(resources) -> None:
    from ragstack.onnx import batch_dependent

    model = resources.embedder._model

    class OneRow:  # an export whose batch dimension is fixed at one
        def run(self, outputs, feed):  # type: ignore[no-untyped-def]
            if len(feed["input_ids"]) > 1:
                raise RuntimeError("Got invalid dimensions for input: input_ids, index: 0 Got: 2 Expected: 1")
            return model.session.run(outputs, feed)

    assert batch_dependent(OneRow(), model.tokenizer, model.inputs, model.outputs[0])
    assert not batch_dependent(model.session, model.tokenizer, model.inputs, model.outputs[0])


def test_several_lone_rows_run_at_once_on_a_one_thread_session(resources, monkeypatch) -> None:
    # Run alone, eight concurrent searches' queries would each wait for the one before on the
    # session's two threads; two one-thread runs at once cost less CPU a query.
    import threading

    queries = resources.query_embedder
    model = queries._model
    assert model.lanes is not None and model.single.get_session_options().intra_op_num_threads == 1
    assert resources.embedder._model.lanes is None  # a model that batches needs none
    real, ran = model.single, []

    class Counted:
        def run(self, outputs, feed):  # type: ignore[no-untyped-def]
            ran.append(threading.get_ident())
            return real.run(outputs, feed)

    monkeypatch.setattr(model, "single", Counted())
    texts = [*TEXTS, "x", "a far longer query about the half-life of caffeine in adults"]
    alone = np.stack([queries.embed([t])[0] for t in texts])
    assert ran == []  # one row keeps the session's threads
    assert np.array_equal(queries.embed(texts), alone)
    assert len(ran) == len(texts) and threading.get_ident() not in ran


def test_lanes_need_sessions_that_agree_bit_for_bit(resources) -> None:
    from ragstack.onnx import same_outputs

    model = resources.query_embedder._model
    args = (model.tokenizer, model.inputs, model.outputs[0])
    assert same_outputs(model.session, model.single, *args)

    class Rounded:  # a CPU whose kernels split a sum by thread count rounds differently
        def run(self, outputs, feed):  # type: ignore[no-untyped-def]
            return [np.asarray(model.session.run(outputs, feed)[0]) + np.float32(1e-7)]

    assert not same_outputs(model.session, Rounded(), *args)
