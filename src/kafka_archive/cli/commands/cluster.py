"""``submit``: the job of ``run`` handed to a Spark cluster by spark-submit."""

from __future__ import annotations

import os

import click

from kafka_archive.cli import invocation
from kafka_archive.cli.cluster import shipping
from kafka_archive.cli.cluster import submit as submitting
from kafka_archive.cli.commands.archive import run
from kafka_archive.cli.options import compile_kcql, load_config, spark_conf


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--master",
    required=True,
    metavar="URL",
    help="spark://host:7077, yarn, k8s://https://host:443 or local[*].",
)
@click.option(
    "--deploy-mode", type=click.Choice(["client", "cluster"]), default="client", show_default=True
)
@click.option(
    "--conf", "confs", multiple=True, metavar="KEY=VALUE", help="A Spark property; repeatable."
)
@click.option("--num-executors", type=click.IntRange(min=1))
@click.option("--executor-memory", metavar="SIZE")
@click.option("--executor-cores", type=click.IntRange(min=1))
@click.option("--driver-memory", metavar="SIZE")
@click.option(
    "--archives",
    "archives",
    multiple=True,
    metavar="PATH#NAME",
    help="An archive unpacked on the cluster (a packed virtualenv); repeatable.",
)
@click.option(
    "--spark-submit",
    "spark_submit_path",
    metavar="PATH",
    help="spark-submit to use (default $SPARK_HOME/bin/spark-submit, else pyspark's).",
)
@click.option(
    "--print-command",
    is_flag=True,
    help="Print the spark-submit command (secrets redacted) instead of running it.",
)
@click.pass_context
def submit(
    ctx: click.Context,
    master: str,
    deploy_mode: str,
    confs: tuple[str, ...],
    num_executors: int | None,
    executor_memory: str | None,
    executor_cores: int | None,
    driver_memory: str | None,
    archives: tuple[str, ...],
    spark_submit_path: str | None,
    print_command: bool,
) -> None:
    """Run the same job as `run` on a Spark cluster; takes every option of `run`."""
    run_args = list(ctx.args)
    run_ctx = run.make_context("run", [*run_args, "--master", master])  # checks the options
    params = run_ctx.params
    if params.get("config") is None and not params.get("kcql_texts"):
        raise click.UsageError("give the job with --kcql or --config, as for run")
    plan = compile_kcql(params["kcql_texts"], load_config(params["config"], {}))  # KCQL first
    spark = submitting.SparkOptions(
        master=master,
        deploy_mode=deploy_mode,
        conf=tuple(spark_conf(confs, "--conf")),
        num_executors=num_executors,
        executor_memory=executor_memory,
        executor_cores=executor_cores,
        driver_memory=driver_memory,
        archives=archives,
        spark_submit=spark_submit_path,
    )
    zip_path = shipping.own_package(submitting.cache_dir(os.environ))
    transform_files = shipping.transform_files(plan, submitting.cache_dir(os.environ))
    schemas = shipping.schema_files(plan, submitting.cache_dir(os.environ))
    if print_command:
        argv = submitting.command(
            spark, run_args, zip_path, os.environ, transform_files, files=schemas
        )
        click.echo(submitting.render(argv))
        return
    invocation.current().say(f"submitting to {master} ({deploy_mode} mode)")
    with submitting.private_files(
        spark, run_args, zip_path, os.environ, transform_files, files=schemas
    ) as argv:
        code = submitting.submit(argv)
    if code != 0:
        ctx.exit(code)
