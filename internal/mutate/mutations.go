package main

// mutations is the table make mutate runs: each entry must be killed. The
// snippets are today's code; when a change moves one, TestEverySnippetIsFoundOnce
// fails in that change's go test, and the entry is rewritten with it.
//
// The lifecycle fold's own entries (issue #36 items 3 and 4) are added with
// the tests that kill them.
var mutations = []Mutation{
	// Recording a payment: the single-row path (issue #36 item 1 and the
	// confirming read that only an accident caught).
	{
		ID:   "single-mismatch-as-duplicate",
		Why:  "#36 item 1: the single-row path answers a mismatching redelivery as a duplicate",
		File: "store/payments.go",
		Snippet: "\trec, err = s.recordSingle(ctx, p, fn)\n\tif errors.Is(err, errConflict) {\n" +
			"\t\treturn s.confirmConflictFunc(ctx, p, fn)\n\t}\n",
		Replacement: "\trec, err = s.recordSingle(ctx, p, fn)\n\tif errors.Is(err, errConflict) {\n" +
			"\t\trec, err = s.confirmConflictFunc(ctx, p, fn)\n" +
			"\t\tif errors.Is(err, ErrMismatch) {\n\t\t\treturn rec, ErrDuplicate\n\t\t}\n\t\treturn rec, err\n\t}\n",
		Packages: []string{"./store/"},
		Run:      "TestTheSingleRowPathConfirmsEachRedeliveryByAFreshRead",
	},
	{
		ID:   "single-no-confirming-read",
		Why:  "#36: the single-row path takes a conflict for a duplicate without reading the stored row",
		File: "store/payments.go",
		Snippet: "\tif errors.Is(err, errConflict) {\n" +
			"\t\treturn s.confirmConflictFunc(ctx, p, fn)\n\t}\n\treturn rec, err\n}\n",
		Replacement: "\tif errors.Is(err, errConflict) {\n" +
			"\t\treturn Payment{}, fmt.Errorf(\"%w: %w\", ErrDuplicate, err)\n\t}\n\treturn rec, err\n}\n",
		Packages: []string{"./store/"},
		Run:      "TestTheSingleRowPathConfirmsEachRedeliveryByAFreshRead",
	},
	{
		ID:          "batch-stored-row-answered-recorded",
		Why:         "#36: a batch row the arbiter held is answered recorded, without the confirming read",
		File:        "store/payments_batch.go",
		Snippet:     "\t\t\tr.answer(batchResult{next: batchConflict})\n",
		Replacement: "\t\t\tr.answer(batchResult{rec: r.p})\n",
		Packages:    []string{"./store/"},
		Run:         "TestABatchRowAlreadyStoredIsConfirmedByAFreshRead|TestAStormOfRedeliveriesGivesEachItsExactAnswer",
	},
	// The UNIQUE constraint as the arbiter, and its confirmation.
	{
		ID:          "conflict-any-code",
		Why:         "the 23505 check: any error naming the arbiter is taken for a conflict",
		File:        "store/errors.go",
		Snippet:     "\t\tpgErr.Code == codeUniqueViolation &&\n",
		Replacement: "\t\tpgErr.Code != \"\" &&\n",
		Packages:    []string{"./store/"},
		Run:         "TestOnlyAUniqueViolationOfTheArbiterIsAConflict",
	},
	{
		ID:          "conflict-any-constraint",
		Why:         "the 23505 check: a unique violation of another index is taken for a duplicate",
		File:        "store/errors.go",
		Snippet:     "\t\tpgErr.ConstraintName == txIDConstraint\n",
		Replacement: "\t\tpgErr.ConstraintName != \"\"\n",
		Packages:    []string{"./store/"},
		Run:         "TestIsTxIDConflictClassifiesRealErrors|TestUniqueViolationOnAnotherIndexIsNotADuplicate",
	},
	{
		ID:          "unnamed-arbiter",
		Why:         "the single-row insert's ON CONFLICT swallows a conflict on any unique index",
		File:        "store/payments.go",
		Snippet:     "ON CONFLICT ON CONSTRAINT payments_transaction_id_key DO NOTHING\nRETURNING received_at`",
		Replacement: "ON CONFLICT DO NOTHING\nRETURNING received_at`",
		Packages:    []string{"./store/"},
		Run:         "TestUniqueViolationOnAnotherIndexIsNotADuplicate",
	},
	{
		ID:          "conflict-without-row-is-duplicate",
		Why:         "the UNIQUE confirmation: a conflict whose stored row cannot be read is answered duplicate",
		File:        "store/payments.go",
		Snippet:     "conflicted on %s but no stored row was found\",\n\t\t\tErrUnavailable,",
		Replacement: "conflicted on %s but no stored row was found\",\n\t\t\tErrDuplicate,",
		Packages:    []string{"./store/"},
		Run:         "TestConflictWithoutStoredRowIsUnavailable",
	},
	{
		ID:          "confirm-ignores-currency",
		Why:         "the UNIQUE confirmation: another currency is answered duplicate",
		File:        "store/payments.go",
		Snippet:     "if stored.Amount != p.Amount || stored.Currency != strings.TrimRight(p.Currency, \" \") {",
		Replacement: "if stored.Amount != p.Amount || strings.TrimRight(p.Currency, \" \") == \"\" {",
		Packages:    []string{"./store/"},
		Run:         "TestRecordPaymentRecordsOnceAndConfirmsDuplicates|TestTheSingleRowPathConfirmsEachRedeliveryByAFreshRead",
	},
	// The lock's lease gates what is sent and what commits.
	{
		ID:   "payment-lease-before-send",
		Why:  "the lease check in RecordPayment: a lease lost before the insert still sends it",
		File: "store/payments.go",
		Snippet: "\tif cause := leaseCause(ctx); cause != nil {\n\t\treturn Payment{}, notSent(cause)\n\t}\n" +
			"\tif s.batch != nil && !alone(ctx) {\n",
		Replacement: "\tif s.batch != nil && !alone(ctx) {\n",
		Packages:    []string{"./store/"},
		Run:         "TestALeaseLostBeforeSendingRecordsNothing",
	},
	{
		ID:   "payment-lease-before-commit",
		Why:  "the lease check in RecordPayment: a hook's transaction commits after the lease was lost",
		File: "store/payments.go",
		Snippet: "\tif cause := leaseCause(ctx); cause != nil {\n\t\ts.rollback(ctx, tx)\n" +
			"\t\treturn Payment{}, fmt.Errorf(\"%w: record payment: not committed: %w\", ErrUnavailable, cause)\n\t}\n",
		Replacement: "",
		Packages:    []string{"./store/"},
		Run:         "TestALeaseLostInAPaymentsHookCommitsNothing",
	},
	{
		ID:   "batch-lease-before-commit",
		Why:  "the lease check in a batch: a batch commits a row whose lease was lost during the hooks",
		File: "store/payments_batch.go",
		Snippet: "\tfor _, r := range rows {\n\t\tif leaseCause(r.ctx) != nil {\n\t\t\treturn nil, errBatchLease\n\t\t}\n\t}\n" +
			"\treturn recorded, nil\n",
		Replacement: "\treturn recorded, nil\n",
		Packages:    []string{"./store/"},
		Run:         "TestBatchRowWhoseLeaseIsLostDoesNotCommitItsHookWork",
	},
	{
		ID:   "event-lease-before-commit",
		Why:  "#36 item 2: RecordEvent commits after the lease was lost",
		File: "store/lifecycle.go",
		Snippet: "\tif err == nil {\n\t\tif cause := leaseCause(ctx); cause != nil {\n" +
			"\t\t\terr = fmt.Errorf(\"%w: record event: not committed: %w\", ErrUnavailable, cause)\n\t\t}\n\t}\n",
		Replacement: "",
		Packages:    []string{"./store/"},
		Run:         "TestALeaseLostInAnEventsHookCommitsNothing",
	},
	// The forward's id: the receiver's deduplication key.
	{
		ID:          "forward-id-without-source",
		Why:         "the forward id: two sources' payments of one transaction id share a webhook-id",
		File:        "store/outbox.go",
		Snippet:     "return \"pay_\" + hash32(source+\"\\n\"+transactionID)",
		Replacement: "return \"pay_\" + hash32(transactionID)",
		Packages:    []string{"./store/"},
		Run:         "TestForwardIDsAreStableAndDistinct",
	},
	// SIGTERM: the forward jobs in hand finish before serve returns.
	{
		ID:          "jobs-hard-stop",
		Why:         "SIGTERM cancels the forward attempts in hand instead of letting them finish (a webhook-id sent twice)",
		File:        "store/jobs.go",
		Snippet:     "\treturn c.Stop, nil\n",
		Replacement: "\treturn c.StopAndCancel, nil\n",
		Packages:    []string{"./cli/"},
		Run:         "TestSIGTERMWithForwardsMidAttemptAndPaymentsQueuedLosesAndDoublesNothing",
	},
	// The lifecycle fold's precedence (package lifecycle).
	{
		ID:          "fold-failed-over-canceled",
		Why:         "the fold's precedence: a payment both failed and canceled reads failed",
		File:        "lifecycle/lifecycle.go",
		Snippet:     "\tcase canceled:\n\t\ts.Status = StatusCanceled\n\tcase failed:\n\t\ts.Status = StatusFailed\n",
		Replacement: "\tcase failed:\n\t\ts.Status = StatusFailed\n\tcase canceled:\n\t\ts.Status = StatusCanceled\n",
		Packages:    []string{"./lifecycle/"},
	},
	{
		ID:          "fold-failure-over-success",
		Why:         "the fold's precedence: a failure undoes a recorded success",
		File:        "lifecycle/lifecycle.go",
		Snippet:     "\tcase success:\n\t\tif s.AmountRefunded > s.Amount {",
		Replacement: "\tcase success && !failed:\n\t\tif s.AmountRefunded > s.Amount {",
		Packages:    []string{"./lifecycle/"},
	},
	// Sinks, telemetry, admin and the delivery log (issue #36 items 5 to 8):
	// their killing tests come with those items' own changes.
	{
		ID:          "kafka-acks-one",
		Why:         "#36 item 5: Kafka with acks=1 and idempotence off",
		File:        "forward/kafka.go",
		Snippet:     "\t\tkgo.RequiredAcks(kgo.AllISRAcks()),",
		Replacement: "\t\tkgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),",
		Packages:    []string{"./forward/"},
		Run:         "^TestKafka",
	},
	{
		ID:          "sampler-ratio-ignored",
		Why:         "#36 item 6: parentbased_traceidratio ignores its ratio",
		File:        "telemetry/telemetry.go",
		Snippet:     "\t\treturn sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SamplerArg))\n",
		Replacement: "\t\treturn sdktrace.ParentBased(sdktrace.AlwaysSample())\n",
		Packages:    []string{"./telemetry/"},
	},
	{
		ID:          "sampler-always-off-samples",
		Why:         "#36 item 6: always_off samples everything",
		File:        "telemetry/telemetry.go",
		Snippet:     "\tcase \"always_off\":\n\t\treturn sdktrace.NeverSample()\n",
		Replacement: "\tcase \"always_off\":\n\t\treturn sdktrace.AlwaysSample()\n",
		Packages:    []string{"./telemetry/"},
	},
	{
		ID:          "admin-over-refunded-false",
		Why:         "#36 item 7: the admin API's over_refunded is always false",
		File:        "admin/payment.go",
		Snippet:     "OverRefunded: p.OverRefunded,",
		Replacement: "OverRefunded: false,",
		Packages:    []string{"./admin/"},
		Run:         "^TestPaymentsAPI|^TestConsolePayment",
	},
	{
		ID:          "delivery-log-cap-zero-keeps",
		Why:         "#36 item 8: PAYLOCK_DELIVERY_LOG_CAP=0 no longer means keep none",
		File:        "cli/deliveries.go",
		Snippet:     "\tif cfg.DeliveryLog.Cap == 0 {\n\t\treturn nil\n\t}\n",
		Replacement: "\tif cfg.DeliveryLog.Cap < 0 {\n\t\treturn nil\n\t}\n",
		Packages:    []string{"./cli/"},
		Run:         "^TestDeliveryLog",
	},
}
