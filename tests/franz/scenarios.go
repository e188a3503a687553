package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pollUntil polls cl until found returns true for a record or onErr for an error of the
// fetches (nil: errors ignored), or timeout passes.
func pollUntil(cl *kgo.Client, timeout time.Duration, found func(*kgo.Record) bool, onErr func(kgo.FetchError) bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		hit := false
		fetches.EachError(func(t string, p int32, err error) {
			if onErr != nil && !errors.Is(err, context.DeadlineExceeded) &&
				onErr(kgo.FetchError{Topic: t, Partition: p, Err: err}) {
				hit = true
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if found(r) {
				hit = true
			}
		})
		if hit {
			return true
		}
	}
	return false
}

func runAddPartitions(args []string) int {
	if len(args) < 2 {
		out("ERROR usage: add-partitions BOOTSTRAP TOPIC")
		return 2
	}
	seeds := kgo.SeedBrokers(strings.Split(args[0], ",")...)
	topic := args[1]
	ctx := context.Background()
	// Metadata refreshes as often as asked (the default minimum age, 5 s, would bound what
	// this measures on any broker).
	minAge := kgo.MetadataMinAge(100 * time.Millisecond)
	producer, err := kgo.NewClient(seeds, minAge, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	defer producer.Close()
	adm := kadm.NewClient(producer)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		out("ERROR create: %v", err)
		return 1
	}
	// A fetch in flight when the partitions are added ends before the new partition is
	// fetched: a short FetchMaxWait keeps that wait small too.
	consumer, err := kgo.NewClient(seeds, minAge, kgo.FetchMaxWait(500*time.Millisecond), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithLogger(sessionLogger{}))
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	defer consumer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("first")}).FirstErr(); err != nil {
		out("ERROR produce: %v", err)
		return 1
	}
	if !pollUntil(consumer, 30*time.Second, func(r *kgo.Record) bool { return string(r.Value) == "first" }, nil) {
		out("ERROR the first record was not read")
		return 1
	}
	if _, err := adm.CreatePartitions(ctx, 2, topic); err != nil {
		out("ERROR create partitions: %v", err)
		return 1
	}
	added := time.Now()
	// The producer learns of the new partitions as any producer does; the consumer is told.
	deadline := time.Now().Add(30 * time.Second)
	for {
		producer.ForceMetadataRefresh()
		err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 2, Value: []byte("new")}).FirstErr()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			out("ERROR produce to the new partition: %v", err)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	produced := time.Now()
	consumer.ForceMetadataRefresh()
	if !pollUntil(consumer, 240*time.Second, func(r *kgo.Record) bool { return r.Partition == 2 }, nil) {
		out("ERROR the record on the new partition was not read in 240 s")
		return 1
	}
	out("PICKED_UP %d %d", time.Since(added).Milliseconds(), time.Since(produced).Milliseconds())
	return 0
}

func runSkipBatch(args []string) int {
	if len(args) < 2 {
		out("ERROR usage: skip-batch BOOTSTRAP TOPIC")
		return 2
	}
	seeds := kgo.SeedBrokers(strings.Split(args[0], ",")...)
	topic := args[1]
	ctx := context.Background()
	plain, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic(topic))
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	defer plain.Close()
	if _, err := kadm.NewClient(plain).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		out("ERROR create: %v", err)
		return 1
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		out("ERROR produce: %v", err)
		return 1
	}
	// One gzip batch of 200 records of 4 KiB each: 800 KiB decompressed, a few KiB on the wire.
	gz, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(time.Second))
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	for i := 0; i < 200; i++ {
		gz.Produce(ctx, &kgo.Record{Value: bytes.Repeat([]byte{'z'}, 4096)}, nil)
	}
	if err := gz.Flush(ctx); err != nil {
		out("ERROR produce gzip: %v", err)
		return 1
	}
	gz.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		out("ERROR produce: %v", err)
		return 1
	}

	consumer, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topic), kgo.MaxDecompressBatchBytes(64<<10),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithLogger(sessionLogger{}))
	if err != nil {
		out("ERROR %v", err)
		return 1
	}
	defer consumer.Close()
	var tooLarge *kgo.ErrDecompressTooLarge
	var before bool
	pollUntil(consumer, 30*time.Second, func(r *kgo.Record) bool {
		before = before || string(r.Value) == "before"
		return false
	}, func(e kgo.FetchError) bool {
		var t *kgo.ErrDecompressTooLarge
		if errors.As(e.Err, &t) {
			tooLarge = t
		}
		return tooLarge != nil
	})
	if !before || tooLarge == nil {
		out("ERROR read before=%v, batch too large error=%v", before, tooLarge)
		return 1
	}
	out("TOO_LARGE offset=%d epoch=%d next=%d", tooLarge.Offset, tooLarge.Epoch, tooLarge.NextOffset)
	seek := time.Now()
	consumer.SetOffsets(map[string]map[int32]kgo.EpochOffset{
		topic: {0: {Epoch: tooLarge.Epoch, Offset: tooLarge.NextOffset}},
	})
	if !pollUntil(consumer, 10*time.Second, func(r *kgo.Record) bool { return string(r.Value) == "after" }, nil) {
		out("ERROR nothing read within 10 s of the seek past the batch")
		return 1
	}
	out("SKIPPED %d", time.Since(seek).Milliseconds())
	return 0
}
