//! The Parquet tables (schema in docs/parquet.md): one row per connection, and beside it one per
//! event and one per finding. Rows are written in row groups of `ROWS_PER_GROUP` as they are
//! read from the analysis (`Analysis::for_each_connection`), so memory holds one group.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::format::KeyValue;
use parquet::schema::types::Type;
use rustc_hash::FxHashMap;

use crate::analysis::Analysis;
use crate::detect;
use crate::flow::{Connection, Detail, Side};

/// The version of the tables' schema, in each file's key-value metadata (`pcapq.schema_version`).
/// Later versions only add columns.
pub const SCHEMA_VERSION: u32 = 2;

/// Rows per row group: a group is held twice while it is written (the rows, then the columns),
/// about 15 MB of connections.
const ROWS_PER_GROUP: usize = 16 * 1024;

/// Epoch microseconds, rounded as the JSON's times are (`json::epoch`).
fn micros(ns: i64) -> i64 {
    ns.div_euclid(1000) + i64::from(ns.rem_euclid(1000) >= 500)
}

fn seconds(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// One finding as the diagnosis wrote it (the `findings[]` of docs/json.md), with what the
/// findings table keeps of it.
#[derive(serde::Deserialize)]
pub struct Finding {
    pub cause: String,
    pub server: String,
    pub confidence: f64,
    #[serde(default)]
    pub confidence_reason: String,
    pub first: f64,
    pub last: f64,
    pub connections: FindingConnections,
}

#[derive(serde::Deserialize)]
pub struct FindingConnections {
    pub count: u64,
    pub ids: Vec<u64>,
}

/// The proxy's log line tied to a connection (the JSON's `proxy_log`, docs/evidence.md).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct ProxyLog {
    pub file: String,
    pub line: u32,
    pub kind: String,
    pub status: Option<u16>,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub exact: bool,
}

/// One capture point's analysis, its name, its findings in precedence order (a connection
/// claimed by several findings gets the cause of the first), and the proxy log's line of each
/// connection a log line was tied to.
pub struct Point<'a> {
    pub analysis: &'a mut Analysis,
    pub name: String,
    pub findings: Vec<Finding>,
    pub proxy_logs: FxHashMap<u64, ProxyLog>,
}

/// Which tables to write.
pub enum Target<'a> {
    /// The connections, to this file.
    File(&'a Path),
    /// `connections.parquet`, `events.parquet` and `findings.parquet` in this directory.
    Directory(&'a Path),
}

/// Writes the tables of `points` (rows of each point in turn).
pub fn write(points: &mut [Point<'_>], target: Target<'_>) -> io::Result<()> {
    let (connections_path, more) = match target {
        Target::File(path) => (path.to_path_buf(), None),
        Target::Directory(dir) => (dir.join("connections.parquet"), Some(dir)),
    };
    let mut connections = Table::create(&connections_path, "connections", connection_columns)?;
    let mut events = more.map(|dir| Table::create(&dir.join("events.parquet"), "events", event_columns)).transpose()?;
    for point in points.iter_mut() {
        let claims = claims(&point.findings);
        let proxy_logs = &point.proxy_logs;
        let end_ns = point.analysis.end_ns();
        let name: Arc<str> = Arc::from(point.name.as_str());
        point.analysis.for_each_connection(|c| {
            let mut row = connection_row(&name, c, end_ns, claims.get(&c.id).copied());
            row.proxy_log = proxy_logs.get(&c.id).cloned();
            connections.push(row)?;
            if let Some(events) = &mut events {
                for e in &c.events {
                    events.push(event_row(&name, c, e))?;
                }
            }
            Ok(())
        })?;
    }
    connections.close()?;
    if let (Some(events), Some(dir)) = (events, more) {
        events.close()?;
        let mut findings = Table::create(&dir.join("findings.parquet"), "findings", finding_columns)?;
        for point in points.iter() {
            for f in &point.findings {
                findings.push(FindingRow { capture_point: Arc::from(point.name.as_str()), finding: f })?;
            }
        }
        findings.close()?;
    }
    Ok(())
}

/// The cause of each claimed connection: the first finding (in the order given) that lists it.
fn claims(findings: &[Finding]) -> FxHashMap<u64, &str> {
    let mut by_id = FxHashMap::default();
    for f in findings {
        for &id in &f.connections.ids {
            by_id.entry(id).or_insert(f.cause.as_str());
        }
    }
    by_id
}

/// A Parquet file being written: rows gathered into groups of `ROWS_PER_GROUP`, each written
/// as a row group.
struct Table<R> {
    rows: Vec<R>,
    writer: SerializedFileWriter<File>,
    columns: Columns<R>,
}

/// A table's columns made from its rows, in the table's order.
type Columns<R> = for<'a> fn(&'a [R]) -> Vec<Column<'a>>;

/// A column: its name, its values, and whether it may hold nulls.
type Column<'a> = (&'static str, Values<'a>, bool);

/// A column's values in one row group, by the type readers see. `None` is a null, which only a
/// column that may hold nulls has.
enum Values<'a> {
    Strings(Vec<Option<&'a str>>),
    U64(Vec<Option<u64>>),
    U32(Vec<Option<u32>>),
    U16(Vec<Option<u16>>),
    U8(Vec<Option<u8>>),
    Bools(Vec<Option<bool>>),
    F64(Vec<Option<f64>>),
    /// Epoch microseconds, UTC.
    Times(Vec<Option<i64>>),
    /// A list per row, never null (a row with none has an empty list).
    StringLists(Vec<&'a [&'a str]>),
    U64Lists(Vec<&'a [u64]>),
}

impl<R> Table<R> {
    fn create(path: &Path, table: &str, columns: Columns<R>) -> io::Result<Table<R>> {
        let schema = Arc::new(schema(&columns(&[])).map_err(io::Error::other)?);
        let metadata = vec![
            KeyValue::new("pcapq.schema".to_string(), format!("pcapq.{table}")),
            KeyValue::new("pcapq.schema_version".to_string(), SCHEMA_VERSION.to_string()),
            KeyValue::new("pcapq.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ];
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(metadata))
            .build();
        let file = File::create(path)?;
        let writer = SerializedFileWriter::new(file, schema, Arc::new(properties)).map_err(io::Error::other)?;
        Ok(Table { rows: Vec::with_capacity(ROWS_PER_GROUP), writer, columns })
    }

    fn push(&mut self, row: R) -> io::Result<()> {
        self.rows.push(row);
        if self.rows.len() >= ROWS_PER_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the rows held as one row group.
    fn flush(&mut self) -> io::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        write_group(&mut self.writer, &(self.columns)(&self.rows)).map_err(io::Error::other)?;
        self.rows.clear();
        Ok(())
    }

    fn close(mut self) -> io::Result<()> {
        self.flush()?;
        self.writer.close().map_err(io::Error::other)?;
        Ok(())
    }
}

/// The file's schema: a field per column, in order.
fn schema(columns: &[Column<'_>]) -> parquet::errors::Result<Type> {
    let fields = columns.iter().map(|(name, values, nullable)| field(name, values, *nullable).map(Arc::new)).collect::<Result<_, _>>()?;
    Type::group_type_builder("schema").with_fields(fields).build()
}

fn field(name: &str, values: &Values<'_>, nullable: bool) -> parquet::errors::Result<Type> {
    let repetition = if nullable { Repetition::OPTIONAL } else { Repetition::REQUIRED };
    let string = Some(LogicalType::String);
    let unsigned = |bit_width| Some(LogicalType::Integer { bit_width, is_signed: false });
    match values {
        Values::Strings(_) => leaf(name, repetition, PhysicalType::BYTE_ARRAY, string),
        Values::U64(_) => leaf(name, repetition, PhysicalType::INT64, unsigned(64)),
        Values::U32(_) => leaf(name, repetition, PhysicalType::INT32, unsigned(32)),
        Values::U16(_) => leaf(name, repetition, PhysicalType::INT32, unsigned(16)),
        Values::U8(_) => leaf(name, repetition, PhysicalType::INT32, unsigned(8)),
        Values::Bools(_) => leaf(name, repetition, PhysicalType::BOOLEAN, None),
        Values::F64(_) => leaf(name, repetition, PhysicalType::DOUBLE, None),
        Values::Times(_) => {
            let timestamp = LogicalType::Timestamp { is_adjusted_to_u_t_c: true, unit: TimeUnit::MICROS(Default::default()) };
            leaf(name, repetition, PhysicalType::INT64, Some(timestamp))
        }
        // A list's items are optional in the schema, though none is ever null: Arrow readers see
        // `list<item: string>`, Arrow's own list type.
        Values::StringLists(_) => list(name, repetition, leaf("item", Repetition::OPTIONAL, PhysicalType::BYTE_ARRAY, string)?),
        Values::U64Lists(_) => list(name, repetition, leaf("item", Repetition::OPTIONAL, PhysicalType::INT64, unsigned(64))?),
    }
}

fn leaf(name: &str, repetition: Repetition, physical: PhysicalType, logical: Option<LogicalType>) -> parquet::errors::Result<Type> {
    Type::primitive_type_builder(name, physical).with_repetition(repetition).with_logical_type(logical).build()
}

/// The standard three-level list: `<repetition> group <name> (LIST) { repeated group list { <item> } }`.
fn list(name: &str, repetition: Repetition, item: Type) -> parquet::errors::Result<Type> {
    let entries = Type::group_type_builder("list").with_repetition(Repetition::REPEATED).with_fields(vec![Arc::new(item)]).build()?;
    Type::group_type_builder(name)
        .with_repetition(repetition)
        .with_logical_type(Some(LogicalType::List))
        .with_fields(vec![Arc::new(entries)])
        .build()
}

/// Writes one row group, a column chunk per column in the schema's order.
fn write_group(writer: &mut SerializedFileWriter<File>, columns: &[Column<'_>]) -> parquet::errors::Result<()> {
    let mut group = writer.next_row_group()?;
    for (name, values, nullable) in columns {
        let mut column = group.next_column()?.ok_or_else(|| ParquetError::General(format!("no column {name} in the schema")))?;
        write_column(&mut column, values, *nullable)?;
        column.close()?;
    }
    group.close()?;
    Ok(())
}

fn write_column(column: &mut SerializedColumnWriter<'_>, values: &Values<'_>, nullable: bool) -> parquet::errors::Result<()> {
    // Parquet keeps unsigned integers in the signed physical type of their width, bit for bit
    // (the INTEGER logical type says they are unsigned); 8- and 16-bit ones in INT32.
    match values {
        Values::Strings(v) => write_values::<ByteArrayType, _>(column, byte_arrays(v.iter().flatten()), v, nullable),
        Values::U64(v) => write_values::<Int64Type, _>(column, v.iter().flatten().map(|&x| x as i64).collect(), v, nullable),
        Values::U32(v) => write_values::<Int32Type, _>(column, v.iter().flatten().map(|&x| x as i32).collect(), v, nullable),
        Values::U16(v) => write_values::<Int32Type, _>(column, v.iter().flatten().map(|&x| i32::from(x)).collect(), v, nullable),
        Values::U8(v) => write_values::<Int32Type, _>(column, v.iter().flatten().map(|&x| i32::from(x)).collect(), v, nullable),
        Values::Bools(v) => write_values::<BoolType, _>(column, v.iter().flatten().copied().collect(), v, nullable),
        Values::F64(v) => write_values::<DoubleType, _>(column, v.iter().flatten().copied().collect(), v, nullable),
        Values::Times(v) => write_values::<Int64Type, _>(column, v.iter().flatten().copied().collect(), v, nullable),
        Values::StringLists(v) => write_lists::<ByteArrayType, _>(column, byte_arrays(v.iter().copied().flatten()), v),
        Values::U64Lists(v) => write_lists::<Int64Type, _>(column, v.iter().copied().flatten().map(|&x| x as i64).collect(), v),
    }
}

/// The strings as Parquet byte arrays, each a slice of one buffer: an allocation per column,
/// not per value.
fn byte_arrays<'a>(strings: impl Iterator<Item = &'a &'a str>) -> Vec<ByteArray> {
    let (mut buffer, mut ends) = (Vec::new(), Vec::new());
    for s in strings {
        buffer.extend_from_slice(s.as_bytes());
        ends.push(buffer.len());
    }
    let buffer = Bytes::from(buffer);
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let slice = buffer.slice(start..end);
            start = end;
            ByteArray::from(slice)
        })
        .collect()
}

/// Writes a column of single values: `present`, the non-null ones of `values` in order, and for
/// a column that may hold nulls a definition level per row (1 for a value, 0 for a null).
fn write_values<T: DataType, V>(
    column: &mut SerializedColumnWriter<'_>,
    present: Vec<T::T>,
    values: &[Option<V>],
    nullable: bool,
) -> parquet::errors::Result<()> {
    let levels: Option<Vec<i16>> = nullable.then(|| values.iter().map(|v| i16::from(v.is_some())).collect());
    if levels.is_none() && present.len() != values.len() {
        return Err(ParquetError::General("a null in a column that holds none".to_string()));
    }
    column.typed::<T>().write_batch(&present, levels.as_deref(), None)?;
    Ok(())
}

/// Writes a column of lists whose items are never null: `items`, every list's items in order.
/// Each item has the list's full definition level and repetition level 0 if it starts its
/// row's list, 1 if not; an empty list is one level pair with no value, defined up to the list
/// but not into it.
fn write_lists<T: DataType, V>(column: &mut SerializedColumnWriter<'_>, items: Vec<T::T>, lists: &[&[V]]) -> parquet::errors::Result<()> {
    let writer = column.typed::<T>();
    let item_level = writer.get_descriptor().max_def_level();
    // The item level less the repeated group and the optional item.
    let empty_level = item_level - 2;
    let (mut definition, mut repetition) = (Vec::with_capacity(items.len()), Vec::with_capacity(items.len()));
    for list in lists {
        if list.is_empty() {
            definition.push(empty_level);
            repetition.push(0);
        }
        for i in 0..list.len() {
            definition.push(item_level);
            repetition.push(i16::from(i > 0));
        }
    }
    writer.write_batch(&items, Some(&definition), Some(&repetition))?;
    Ok(())
}

fn strings<'a>(values: impl Iterator<Item = &'a str>) -> Values<'a> {
    Values::Strings(values.map(Some).collect())
}

fn optional_strings<'a>(values: impl Iterator<Item = Option<&'a str>>) -> Values<'a> {
    Values::Strings(values.collect())
}

fn times<'a>(values: impl Iterator<Item = Option<i64>>) -> Values<'a> {
    Values::Times(values.map(|ns| ns.map(micros)).collect())
}

fn u64s<'a>(values: impl Iterator<Item = u64>) -> Values<'a> {
    Values::U64(values.map(Some).collect())
}

fn u32s<'a>(values: impl Iterator<Item = u32>) -> Values<'a> {
    Values::U32(values.map(Some).collect())
}

fn u16s<'a>(values: impl Iterator<Item = u16>) -> Values<'a> {
    Values::U16(values.map(Some).collect())
}

fn f64s<'a>(values: impl Iterator<Item = f64>) -> Values<'a> {
    Values::F64(values.map(Some).collect())
}

fn bools<'a>(values: impl Iterator<Item = bool>) -> Values<'a> {
    Values::Bools(values.map(Some).collect())
}

// --- connections ---

struct ConnectionRow {
    capture_point: Arc<str>,
    id: u64,
    client_ip: String,
    client_port: u16,
    server_ip: String,
    server_port: u16,
    server: String,
    ip_version: u8,
    partial: bool,
    follows: Option<u64>,
    state: &'static str,
    first_file: u32,
    first_frame: u64,
    first_time_ns: i64,
    last_time_ns: i64,
    handshake_completed: bool,
    syn_attempts: u32,
    synack_attempts: u32,
    syn_time_ns: Option<i64>,
    synack_time_ns: Option<i64>,
    ack_time_ns: Option<i64>,
    handshake_duration_ns: Option<i64>,
    request_sent_ns: Option<i64>,
    request_acked_ns: Option<i64>,
    response_ns: Option<i64>,
    reset_from: Option<&'static str>,
    outcome: &'static str,
    symptoms: Vec<&'static str>,
    sides: [crate::flow::connection::DirectionCounts; 2],
    added_latency_ns: i64,
    cause: Option<String>,
    proxy_log: Option<ProxyLog>,
}

fn connection_row(capture_point: &Arc<str>, c: &Connection, end_ns: i64, cause: Option<&str>) -> ConnectionRow {
    let verdict = detect::judge(c, end_ns);
    ConnectionRow {
        capture_point: capture_point.clone(),
        id: c.id,
        client_ip: c.client.ip.to_string(),
        client_port: c.client.port,
        server_ip: c.server.ip.to_string(),
        server_port: c.server.port,
        server: c.server.to_string(),
        ip_version: if c.client.ip.is_ipv4() { 4 } else { 6 },
        partial: c.partial,
        follows: c.follows,
        state: c.state.slug(),
        first_file: c.first.file,
        first_frame: c.first.frame,
        first_time_ns: c.first_time_ns,
        last_time_ns: c.last_time_ns,
        handshake_completed: c.handshake_completed(),
        syn_attempts: c.syn_count,
        synack_attempts: c.synack_count,
        syn_time_ns: c.syn_time_ns.get(),
        synack_time_ns: c.synack_time_ns.get(),
        ack_time_ns: c.handshake_ack_time_ns.get(),
        handshake_duration_ns: c.handshake_duration_ns(),
        request_sent_ns: c.milestones.client_data_ns.get(),
        request_acked_ns: c.milestones.client_data_acked_ns.get(),
        response_ns: c.milestones.server_data_ns.get(),
        reset_from: c.milestones.first_rst().map(|r| r.from.name()),
        outcome: verdict.outcome.slug(),
        symptoms: verdict.symptoms.iter().map(|s| s.slug()).collect(),
        sides: c.counts,
        added_latency_ns: verdict.added_latency_ns,
        cause: cause.map(str::to_string),
        proxy_log: None,
    }
}

fn connection_columns(rows: &[ConnectionRow]) -> Vec<Column<'_>> {
    let (client, server) = (Side::Client.index(), Side::Server.index());
    vec![
        ("capture_point", strings(rows.iter().map(|r| &*r.capture_point)), false),
        ("id", u64s(rows.iter().map(|r| r.id)), false),
        ("client_ip", strings(rows.iter().map(|r| r.client_ip.as_str())), false),
        ("client_port", u16s(rows.iter().map(|r| r.client_port)), false),
        ("server_ip", strings(rows.iter().map(|r| r.server_ip.as_str())), false),
        ("server_port", u16s(rows.iter().map(|r| r.server_port)), false),
        ("server", strings(rows.iter().map(|r| r.server.as_str())), false),
        ("ip_version", Values::U8(rows.iter().map(|r| Some(r.ip_version)).collect()), false),
        ("partial", bools(rows.iter().map(|r| r.partial)), false),
        ("follows", Values::U64(rows.iter().map(|r| r.follows).collect()), true),
        ("state", strings(rows.iter().map(|r| r.state)), false),
        ("first_file", u32s(rows.iter().map(|r| r.first_file)), false),
        ("first_frame", u64s(rows.iter().map(|r| r.first_frame)), false),
        ("first_time", times(rows.iter().map(|r| Some(r.first_time_ns))), false),
        ("last_time", times(rows.iter().map(|r| Some(r.last_time_ns))), false),
        ("duration", f64s(rows.iter().map(|r| seconds(r.last_time_ns - r.first_time_ns))), false),
        ("handshake_completed", bools(rows.iter().map(|r| r.handshake_completed)), false),
        ("syn_attempts", u32s(rows.iter().map(|r| r.syn_attempts)), false),
        ("synack_attempts", u32s(rows.iter().map(|r| r.synack_attempts)), false),
        ("syn_time", times(rows.iter().map(|r| r.syn_time_ns)), true),
        ("synack_time", times(rows.iter().map(|r| r.synack_time_ns)), true),
        ("ack_time", times(rows.iter().map(|r| r.ack_time_ns)), true),
        ("handshake_duration", Values::F64(rows.iter().map(|r| r.handshake_duration_ns.map(seconds)).collect()), true),
        ("request_sent", times(rows.iter().map(|r| r.request_sent_ns)), true),
        ("request_acked", times(rows.iter().map(|r| r.request_acked_ns)), true),
        ("response_first", times(rows.iter().map(|r| r.response_ns)), true),
        ("reset_from", optional_strings(rows.iter().map(|r| r.reset_from)), true),
        ("outcome", strings(rows.iter().map(|r| r.outcome)), false),
        ("symptoms", Values::StringLists(rows.iter().map(|r| r.symptoms.as_slice()).collect()), false),
        ("client_packets", u64s(rows.iter().map(|r| r.sides[client].packets)), false),
        ("server_packets", u64s(rows.iter().map(|r| r.sides[server].packets)), false),
        ("client_bytes", u64s(rows.iter().map(|r| r.sides[client].payload_bytes)), false),
        ("server_bytes", u64s(rows.iter().map(|r| r.sides[server].payload_bytes)), false),
        ("client_data_retransmits", u32s(rows.iter().map(|r| r.sides[client].data_retransmits)), false),
        ("server_data_retransmits", u32s(rows.iter().map(|r| r.sides[server].data_retransmits)), false),
        ("client_dup_acks", u32s(rows.iter().map(|r| r.sides[client].dup_acks)), false),
        ("server_dup_acks", u32s(rows.iter().map(|r| r.sides[server].dup_acks)), false),
        ("client_zero_windows", u32s(rows.iter().map(|r| r.sides[client].zero_windows)), false),
        ("server_zero_windows", u32s(rows.iter().map(|r| r.sides[server].zero_windows)), false),
        ("client_fin", bools(rows.iter().map(|r| r.sides[client].fin)), false),
        ("server_fin", bools(rows.iter().map(|r| r.sides[server].fin)), false),
        ("client_rst", bools(rows.iter().map(|r| r.sides[client].rst)), false),
        ("server_rst", bools(rows.iter().map(|r| r.sides[server].rst)), false),
        ("added_latency", f64s(rows.iter().map(|r| seconds(r.added_latency_ns))), false),
        ("cause", optional_strings(rows.iter().map(|r| r.cause.as_deref())), true),
        ("proxy_log_file", optional_strings(rows.iter().map(|r| r.proxy_log.as_ref().map(|p| p.file.as_str()))), true),
        ("proxy_log_line", Values::U32(rows.iter().map(|r| r.proxy_log.as_ref().map(|p| p.line)).collect()), true),
        ("proxy_log_kind", optional_strings(rows.iter().map(|r| r.proxy_log.as_ref().map(|p| p.kind.as_str()))), true),
        ("proxy_log_status", Values::U16(rows.iter().map(|r| r.proxy_log.as_ref().and_then(|p| p.status)).collect()), true),
        ("proxy_log_exact", Values::Bools(rows.iter().map(|r| r.proxy_log.as_ref().map(|p| p.exact)).collect()), true),
        ("proxy_log_text", optional_strings(rows.iter().map(|r| r.proxy_log.as_ref().map(|p| p.text.as_str()))), true),
    ]
}

// --- events ---

struct EventRow {
    capture_point: Arc<str>,
    connection: u64,
    file: u32,
    frame: u64,
    time_ns: i64,
    offset_ns: i64,
    kind: &'static str,
    from: &'static str,
    flags: String,
    seq: Option<u32>,
    ack: Option<u32>,
    len: u32,
    win: u16,
    attempt: Option<u32>,
}

fn event_row(capture_point: &Arc<str>, c: &Connection, e: &crate::flow::Event) -> EventRow {
    let (seq, ack) = super::json::relative_seq_ack(c, e);
    EventRow {
        capture_point: capture_point.clone(),
        connection: c.id,
        file: e.at.file,
        frame: e.at.frame,
        time_ns: e.time_ns,
        offset_ns: e.time_ns - c.first_time_ns,
        kind: e.kind.slug(),
        from: e.from.name(),
        flags: super::json::flags_text(e.flags),
        seq,
        ack,
        len: e.len,
        win: e.window,
        attempt: match e.detail {
            Detail::Attempt { attempt, .. } => Some(attempt),
            _ => None,
        },
    }
}

fn event_columns(rows: &[EventRow]) -> Vec<Column<'_>> {
    vec![
        ("capture_point", strings(rows.iter().map(|r| &*r.capture_point)), false),
        ("connection", u64s(rows.iter().map(|r| r.connection)), false),
        ("file", u32s(rows.iter().map(|r| r.file)), false),
        ("frame", u64s(rows.iter().map(|r| r.frame)), false),
        ("time", times(rows.iter().map(|r| Some(r.time_ns))), false),
        ("offset", f64s(rows.iter().map(|r| seconds(r.offset_ns))), false),
        ("kind", strings(rows.iter().map(|r| r.kind)), false),
        ("from", strings(rows.iter().map(|r| r.from)), false),
        ("flags", strings(rows.iter().map(|r| r.flags.as_str())), false),
        ("seq", Values::U32(rows.iter().map(|r| r.seq).collect()), true),
        ("ack", Values::U32(rows.iter().map(|r| r.ack).collect()), true),
        ("len", u32s(rows.iter().map(|r| r.len)), false),
        ("win", u16s(rows.iter().map(|r| r.win)), false),
        ("attempt", Values::U32(rows.iter().map(|r| r.attempt).collect()), true),
    ]
}

// --- findings ---

struct FindingRow<'a> {
    capture_point: Arc<str>,
    finding: &'a Finding,
}

fn finding_columns<'a>(rows: &'a [FindingRow<'_>]) -> Vec<Column<'a>> {
    fn f<'a>(r: &FindingRow<'a>) -> &'a Finding {
        r.finding
    }
    let epoch_ns = |s: f64| (s * 1e9).round() as i64;
    vec![
        ("capture_point", strings(rows.iter().map(|r| &*r.capture_point)), false),
        ("cause", strings(rows.iter().map(|r| f(r).cause.as_str())), false),
        ("server", strings(rows.iter().map(|r| f(r).server.as_str())), false),
        ("confidence", f64s(rows.iter().map(|r| f(r).confidence)), false),
        ("confidence_reason", strings(rows.iter().map(|r| f(r).confidence_reason.as_str())), false),
        ("first", times(rows.iter().map(|r| Some(epoch_ns(f(r).first)))), false),
        ("last", times(rows.iter().map(|r| Some(epoch_ns(f(r).last)))), false),
        ("connections", u64s(rows.iter().map(|r| f(r).connections.count)), false),
        ("connection_ids", Values::U64Lists(rows.iter().map(|r| f(r).connections.ids.as_slice()).collect()), false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_micros_round_as_json_epoch() {
        assert_eq!(micros(1_795_242_024_886_201_100), 1_795_242_024_886_201);
        assert_eq!(micros(1_795_242_024_886_201_600), 1_795_242_024_886_202);
    }

    #[test]
    fn test_claims_first_finding_in_order_wins() {
        let finding = |cause: &str, ids: Vec<u64>| Finding {
            cause: cause.into(),
            server: "10.0.0.2:9000".into(),
            confidence: 1.0,
            confidence_reason: String::new(),
            first: 0.0,
            last: 0.0,
            connections: FindingConnections { count: ids.len() as u64, ids },
        };
        let findings = vec![finding("syn_flood", vec![1, 2]), finding("network_loss", vec![2, 3])];
        let by_id = claims(&findings);
        assert_eq!((by_id[&1], by_id[&2], by_id[&3]), ("syn_flood", "syn_flood", "network_loss"));
        assert!(!by_id.contains_key(&4));
    }
}
