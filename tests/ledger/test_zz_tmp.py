import asyncio, psycopg
async def test_tmp(pg):
    dsn = pg.aggregator_dsn
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    other = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await other.execute("SELECT pg_advisory_lock(424242)")
    t = asyncio.create_task(conn.execute("SELECT pg_advisory_lock(424242)"))
    await asyncio.sleep(0.3)
    t.cancel()
    try:
        await t
    except BaseException as e:
        print("cancelled:", type(e).__name__)
    try:
        cur = await conn.execute("SELECT 1"); print("after:", await cur.fetchone(), conn.info.transaction_status)
    except Exception as e:
        print("conn broken:", type(e).__name__, e)
    await other.execute("SELECT pg_advisory_unlock(424242)")
    await asyncio.sleep(0.3)
    cur = await other.execute("SELECT pid, granted FROM pg_locks WHERE locktype='advisory' AND objid=424242")
    print("advisory locks:", await cur.fetchall(), "conn pid", conn.info.backend_pid)
