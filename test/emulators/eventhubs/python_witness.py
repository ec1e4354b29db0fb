"""Independent witness for the Event Hubs emulator: Microsoft's Python azure.eventhub client
(Debian python3-azure, pure-Python AMQP stack). Prints one JSON object on stdout.

usage: python_witness.py <connection-string> <ca-file> <mode>
  mode "roundtrip": properties, a keyed batch, a batch to partition 1, read back from earliest
  mode "wrong-key": one send that must fail authentication
"""
import json
import sys
import time

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient


def main() -> None:
    conn_str, ca_file, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    common = dict(connection_verify=ca_file, retry_total=1, retry_backoff_factor=0.05, retry_backoff_max=0.2)
    out = {}
    producer = EventHubProducerClient.from_connection_string(conn_str, **common)
    with producer:
        if mode == "wrong-key":
            try:
                producer.send_batch([EventData('{"n": -1}')])
                out["sent"] = True
            except Exception as exc:  # noqa: BLE001 - the class name is the witness's answer
                out["error"] = type(exc).__name__
                out["message"] = str(exc)[:300]
            print(json.dumps(out))
            return
        props = producer.get_eventhub_properties()
        out["hub"] = {"name": props["eventhub_name"], "partition_ids": props["partition_ids"]}
        batch = producer.create_batch(partition_key="py-key")
        for i in range(3):
            batch.add(EventData(json.dumps({"from": "python", "n": i})))
        producer.send_batch(batch)
        producer.send_batch([EventData(json.dumps({"from": "python", "n": 10}))], partition_id="1")
        out["partitions"] = {}
        for pid in props["partition_ids"]:
            p = producer.get_partition_properties(pid)
            out["partitions"][pid] = {
                "last_enqueued_sequence_number": p["last_enqueued_sequence_number"],
                "last_enqueued_offset": p["last_enqueued_offset"],
                "is_empty": p["is_empty"],
                "beginning_sequence_number": p["beginning_sequence_number"],
            }

    received = []
    expected = sum(p["last_enqueued_sequence_number"] + 1 for p in out["partitions"].values())
    consumer = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$default", **common)

    def on_event(partition_context, event):
        if event is None:
            return
        received.append(
            {
                "partition": partition_context.partition_id,
                "sequence_number": event.sequence_number,
                "offset": str(event.offset),
                "partition_key": event.partition_key.decode() if isinstance(event.partition_key, bytes) else event.partition_key,
                "body": event.body_as_str(),
            }
        )
        if len(received) >= expected:
            consumer.close()

    deadline = time.time() + 20
    with consumer:
        import threading

        t = threading.Thread(
            target=consumer.receive,
            kwargs=dict(on_event=on_event, starting_position="-1", max_wait_time=1),
            daemon=True,
        )
        t.start()
        while t.is_alive() and time.time() < deadline and len(received) < expected:
            time.sleep(0.1)
    out["received"] = received
    print(json.dumps(out))


if __name__ == "__main__":
    main()
