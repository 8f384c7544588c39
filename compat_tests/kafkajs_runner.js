// KafkaJS side of the compatibility harness: one JSON command on stdin, JSON lines on stdout.
// The last line is {"ok": true, "result": ...} or {"ok": false, "error": {...}}; the
// "member" command streams {"assigned": [...]} and {"record": {...}} lines until stdin closes.
'use strict'
const { Kafka, logLevel, CompressionTypes, CompressionCodecs, ConfigResourceTypes } = require('kafkajs')
try { CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy') } catch (e) {}

const COMPRESSION = { gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function record (topic, partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) headers.push([k, b64(one)])
  }
  return { key: b64(m.key), value: b64(m.value), headers, timestamp: Number(m.timestamp),
    partition, offset: Number(m.offset) }
}

function errorOf (e) {
  const inner = (e.errors && e.errors[0]) || e.cause || {}
  return { code: e.code || inner.code || null, type: e.type || inner.type || e.name,
    message: String(e.message || e).slice(0, 200) }
}

async function consumeUntil (kafka, cmd, groupId, onMessage) {
  // a short long-poll: disconnect() waits for the fetch in flight
  const consumer = kafka.consumer({ groupId, heartbeatInterval: 300, sessionTimeout: 10000,
    maxWaitTimeInMs: 200, allowAutoTopicCreation: false })
  await consumer.connect()
  await consumer.subscribe({ topic: cmd.topic, fromBeginning: true })
  let done = false
  await consumer.run({ autoCommit: cmd.autoCommit !== false,
    eachMessage: async ({ topic, partition, message }) => { if (!done && onMessage(topic, partition, message)) done = true } })
  const deadline = Date.now() + (cmd.timeoutMs || 15000)
  while (!done && Date.now() < deadline) await sleep(50)
  return consumer
}

const commands = {
  async produce (kafka, cmd) {
    const producer = kafka.producer({ idempotent: !!cmd.idempotent, allowAutoTopicCreation: false,
      ...(cmd.idempotent ? { maxInFlightRequests: 1 } : {}) })
    await producer.connect()
    try {
      const messages = cmd.records.map((r) => {
        const m = { key: unb64(r.key), value: unb64(r.value) }
        if (r.headers && r.headers.length) {
          m.headers = {}
          for (const [k, v] of r.headers) m.headers[k] = unb64(v)
        }
        if (r.timestamp !== null && r.timestamp !== undefined) m.timestamp = String(r.timestamp)
        if (r.partition !== null && r.partition !== undefined) m.partition = r.partition
        return m
      })
      const meta = await producer.send({ topic: cmd.topic, messages, acks: cmd.idempotent ? -1 : 1,
        compression: cmd.compression ? COMPRESSION[cmd.compression] : CompressionTypes.None })
      return meta.map((m) => [m.partition, Number(m.baseOffset)])
    } finally { await producer.disconnect() }
  },
  async fetch (kafka, cmd) {
    const got = []
    const want = cmd.partitions
    const consumer = await consumeUntil(kafka, { ...cmd, autoCommit: false }, `kafkajs-fetch-${Date.now()}-${Math.random()}`,
      (topic, partition, m) => {
        if (!want || want.includes(partition)) got.push(record(topic, partition, m))
        return got.length >= cmd.count
      })
    await consumer.disconnect()
    return got
  },
  async offsets (kafka, cmd) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      if (cmd.spec === 'earliest' || cmd.spec === 'latest') {
        const all = await admin.fetchTopicOffsets(cmd.topic)
        const p = all.find((x) => x.partition === cmd.partition)
        return Number(cmd.spec === 'earliest' ? p.low : p.high)
      }
      const all = await admin.fetchTopicOffsetsByTimestamp(cmd.topic, cmd.spec)
      return Number(all.find((x) => x.partition === cmd.partition).offset)
    } finally { await admin.disconnect() }
  },
  async member (kafka, cmd) {
    const consumer = kafka.consumer({ groupId: cmd.group, heartbeatInterval: 300, sessionTimeout: 10000,
      maxWaitTimeInMs: 200 })
    consumer.on(consumer.events.GROUP_JOIN, (e) => out({ assigned: e.payload.memberAssignment[cmd.topic] || [] }))
    await consumer.connect()
    await consumer.subscribe({ topic: cmd.topic, fromBeginning: true })
    await consumer.run({ eachMessage: async ({ topic, partition, message }) => out({ record: record(topic, partition, message) }) })
    await new Promise((resolve) => { process.stdin.on('end', resolve); process.stdin.on('close', resolve); process.stdin.resume() })
    await consumer.disconnect()
    return null
  },
  async consume_in_group (kafka, cmd) {
    const got = []
    const consumer = await consumeUntil(kafka, { ...cmd, autoCommit: false }, cmd.group, (topic, partition, m) => {
      if (got.length < cmd.count) got.push(record(topic, partition, m))
      return got.length >= cmd.count
    })
    if (got.length) {
      const last = got[got.length - 1]
      await consumer.commitOffsets([{ topic: cmd.topic, partition: last.partition, offset: String(last.offset + 1) }])
    }
    await consumer.disconnect()
    return got
  },
  async create (kafka, cmd) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const created = await admin.createTopics({ waitForLeaders: true, timeout: 10000, topics: [{
        topic: cmd.topic, numPartitions: cmd.partitions, replicationFactor: 1,
        configEntries: Object.entries(cmd.configs || {}).map(([name, value]) => ({ name, value })) }] })
      if (!created) throw Object.assign(new Error('createTopics returned false (topic exists)'), { code: 36, type: 'TOPIC_ALREADY_EXISTS' })
      return true
    } finally { await admin.disconnect() }
  },
  async describe (kafka, cmd) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      const md = await admin.fetchTopicMetadata({ topics: [cmd.topic] })
      const cfg = await admin.describeConfigs({ includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: cmd.topic }] })
      const values = {}
      for (const e of cfg.resources[0].configEntries) values[e.configName] = e.configValue
      return [md.topics[0].partitions.length, values]
    } finally { await admin.disconnect() }
  },
  async delete (kafka, cmd) {
    const admin = kafka.admin()
    await admin.connect()
    try { await admin.deleteTopics({ topics: [cmd.topic], timeout: 10000 }); return true } finally { await admin.disconnect() }
  },
  async list (kafka) {
    const admin = kafka.admin()
    await admin.connect()
    try { return await admin.listTopics() } finally { await admin.disconnect() }
  }
}

async function main () {
  let text = ''
  process.stdin.setEncoding('utf8')
  // the command is the first line; "member" keeps stdin open as its stop signal
  const line = await new Promise((resolve) => {
    process.stdin.on('data', (chunk) => {
      text += chunk
      const i = text.indexOf('\n')
      if (i >= 0) resolve(text.slice(0, i))
    })
    process.stdin.on('end', () => resolve(text))
  })
  const cmd = JSON.parse(line)
  const kafka = new Kafka({ clientId: 'kwire-compat', brokers: [cmd.bootstrap], logLevel: logLevel.NOTHING,
    connectionTimeout: 5000, requestTimeout: 15000, retry: { retries: cmd.retries ?? 2, initialRetryTime: 100 } })
  try {
    out({ ok: true, result: await commands[cmd.op](kafka, cmd) })
  } catch (e) {
    out({ ok: false, error: errorOf(e) })
  }
  process.exit(0)
}
main()
