package forward_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paylock/paylock/forward/sinktest"
)

func init() {
	harnesses["kafka"] = kafkaHarness
}

// kafkaTopic is the topic of the kafka harness.
const kafkaTopic = "paylock.sinktest"

// kafkaDestination watches the produce requests of an in-process Kafka
// cluster (franz-go's kfake): it keeps every record they carry, and answers
// the ones it was told to refuse itself, as a broker would: refused for now
// (TOPIC_AUTHORIZATION_FAILED: writes denied until an operator allows
// them) or for good (MESSAGE_TOO_LARGE). The others the cluster takes.
type kafkaDestination struct {
	t       testing.TB
	c       *kfake.Cluster
	mu      sync.Mutex
	got     []sinktest.Received
	refuse  int
	forGood bool
}

// produce is the cluster's control function for Produce requests.
func (d *kafkaDestination) produce(kreq kmsg.Request) (kmsg.Response, error, bool) {
	d.c.KeepControl()
	req := kreq.(*kmsg.ProduceRequest)
	d.mu.Lock()
	defer d.mu.Unlock()
	refused, code := false, int16(0)
	switch {
	case d.forGood:
		refused, code, d.forGood = true, kerr.MessageTooLarge.Code, false
	case d.refuse > 0:
		refused, code = true, kerr.TopicAuthorizationFailed.Code
		d.refuse--
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			d.keep(p.Records, p.Partition, !refused)
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if !refused {
		return nil, nil, false // the cluster stores them
	}
	return resp, nil, true
}

// keep records the records of one partition's batch, the partition as
// their lane.
func (d *kafkaDestination) keep(raw []byte, partition int32, accepted bool) {
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(raw); err != nil {
		d.t.Errorf("a produce request with a batch that does not decode: %v", err)
		return
	}
	recs, err := kfake.BatchRecords(batch)
	if err != nil {
		d.t.Errorf("a batch whose records do not decode: %v", err)
		return
	}
	for _, r := range recs {
		h := map[string]string{}
		for _, rh := range r.Headers {
			h[strings.ToLower(rh.Key)] = string(rh.Value)
		}
		d.got = append(d.got, sinktest.Received{Header: h, Key: string(r.Key), Lane: strconv.Itoa(int(partition)), Body: r.Value, Accepted: accepted})
	}
}

// kafkaHarness starts a three-broker kfake cluster with the topic in
// three partitions.
func kafkaHarness(t *testing.T) sinktest.Harness {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, kafkaTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	d := &kafkaDestination{t: t, c: c}
	c.ControlKey(int16(kmsg.Produce), d.produce)
	return sinktest.Harness{
		URL: "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/" + kafkaTopic,
		Received: func() []sinktest.Received {
			d.mu.Lock()
			defer d.mu.Unlock()
			return append([]sinktest.Received(nil), d.got...)
		},
		Refuse: func(n int) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.refuse += n
		},
		RefusePermanently: func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.forGood = true
		},
		Keyed: true,
	}
}
