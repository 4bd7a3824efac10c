//! `-o` beside `-i`: the recording being read, written again as perf.data (`-o FILE`) or in
//! perf's pipe format (`-o -`): the input's attributes (as the file has them, with their
//! ids), then every record as the reader reads it (a `perf record -z` file's records come out
//! decompressed), then the features perfwatch reads from the input (host, OS release,
//! version, arch, CPUs, command line, event names, build ids, tracing data), so that
//! `perf script -i` reads the copy as it reads the input. Features perfwatch does not read
//! (CPU topology, memory, PMU mappings...) are not carried over; nor is AUX area data.
//!
//! It runs on the recording's reading thread (no queue: a slow disk slows the reading, which
//! is the point of a copy) and, as root, writes by [`OutputFile`]'s rules, like `-o` live.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{Context, Result};

use super::layout::{self, Features, HitBinary};
use crate::record_file::format as f;
use crate::record_file::{RecordCopy, RecordingInfo};
use crate::script::output_file::OutputFile;

/// A copy being written.
pub struct CopyOut {
    shown: String,
    file: Option<OutputFile>,
    w: BufWriter<File>,
    pos: u64,
    error: Option<std::io::Error>,
    features: Features,
    attr_size: usize,
    attrs_at: (u64, u64),
    data_at: u64,
    records: u64,
}

impl CopyOut {
    /// Create `path` (`-`: stdout, perf's pipe format) and write what comes before the
    /// records.
    pub fn create(path: &Path, info: &RecordingInfo) -> Result<CopyOut> {
        let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
        let (file, w) = if path == Path::new("-") {
            use std::os::fd::AsFd;
            let out = std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot write the recording to stdout")?;
            (None, File::from(out))
        } else {
            let mut o = OutputFile::create("-o", path)
                .with_context(|| format!("cannot write the recording '-o {shown}'"))?;
            let w = o.file().try_clone()?;
            (Some(o), w)
        };
        let mut c = CopyOut {
            shown,
            file,
            w: BufWriter::with_capacity(1 << 20, w),
            pos: 0,
            error: None,
            features: features_of(info),
            attr_size: info.attrs.iter().map(|a| a.raw.len()).max().unwrap_or(0),
            attrs_at: (0, 0),
            data_at: 0,
            records: 0,
        };
        let attrs: Vec<(&[u8], &[u64])> = info
            .attrs
            .iter()
            .map(|a| (a.raw.as_slice(), a.ids.as_slice()))
            .collect();
        if c.file.is_none() {
            c.put(&layout::pipe_header());
            for (a, ids) in &attrs {
                c.put(&layout::attr_records(a, ids));
            }
            for (_, name, ids) in &c.features.events.clone() {
                if let Some(r) = layout::event_name_record(ids.first().copied(), name) {
                    c.put(&r);
                }
            }
            for (bit, body) in c.features.sections() {
                if ![f::FEAT_BUILD_ID, f::FEAT_EVENT_DESC, f::FEAT_TRACING_DATA].contains(&bit) {
                    if let Some(r) = layout::feature_record(bit, &body) {
                        c.put(&r);
                    }
                }
            }
            if let Some(t) = c.features.tracing_data.clone() {
                c.put(&layout::tracing_data_record(&t));
            }
            for b in c.features.build_ids.clone() {
                c.put(&layout::build_id_record(f::HEADER_BUILD_ID, &b));
            }
        } else {
            c.put(&[0; f::FILE_HEADER_SIZE as usize]);
            let mut id_at = Vec::new();
            for (_, ids) in &attrs {
                id_at.push((c.pos, ids.len() as u64 * 8));
                for id in *ids {
                    c.put(&id.to_le_bytes());
                }
            }
            c.attrs_at.0 = c.pos;
            for ((a, _), (off, size)) in attrs.iter().zip(&id_at) {
                let mut a = a.to_vec();
                a.resize(c.attr_size, 0);
                c.put(&a);
                c.put(&off.to_le_bytes());
                c.put(&size.to_le_bytes());
            }
            c.attrs_at.1 = c.pos - c.attrs_at.0;
        }
        c.data_at = c.pos;
        Ok(c)
    }

    fn put(&mut self, b: &[u8]) {
        if self.error.is_some() {
            return;
        }
        match self.w.write_all(b) {
            Ok(()) => self.pos += b.len() as u64,
            Err(e) => self.error = Some(e),
        }
    }
}

impl RecordCopy for CopyOut {
    fn record(&mut self, rec: &[u8]) {
        self.put(rec);
        self.records += 1;
    }

    fn finish(mut self: Box<Self>) -> Result<String, String> {
        if let Some(file) = self.file.take() {
            let data = (self.data_at, self.pos - self.data_at);
            let sections = self.features.sections();
            let mut at = self.pos + 16 * sections.len() as u64;
            let mut index = Vec::new();
            for (_, body) in &sections {
                index.extend_from_slice(&at.to_le_bytes());
                index.extend_from_slice(&(body.len() as u64).to_le_bytes());
                at += body.len() as u64;
            }
            self.put(&index);
            for (_, body) in &sections {
                self.put(body);
            }
            let bits: Vec<u32> = sections.iter().map(|(b, _)| *b).collect();
            let h = layout::file_header(self.attr_size, self.attrs_at, data, &bits);
            if self.error.is_none() {
                if let Err(e) = self
                    .w
                    .flush()
                    .and_then(|_| self.w.get_ref().write_all_at(&h, 0))
                {
                    self.error = Some(e);
                }
            }
            if self.error.is_none() {
                self.error = file.commit().err();
            }
        } else if self.error.is_none() {
            self.error = self.w.flush().err();
        }
        match &self.error {
            Some(e) => Err(format!(
                "the recording '-o {}' was not written: {e}",
                self.shown
            )),
            None => Ok(format!(
                "recording '-o {}': {} records, {:.1} MB, copied from the input",
                self.shown,
                self.records,
                self.pos as f64 / 1e6
            )),
        }
    }
}

/// The features perfwatch read from the recording, to write again.
fn features_of(info: &RecordingInfo) -> Features {
    let facts = &info.facts;
    let s = |v: &Option<String>| v.clone().unwrap_or_default().into_bytes();
    let mut build_ids: Vec<HitBinary> = facts
        .build_ids
        .iter()
        .map(|(name, id)| HitBinary {
            name: name.to_vec(),
            build_id: *id,
            kernel: name.starts_with(b"[kernel"),
        })
        .collect();
    build_ids.sort_by(|a, b| a.name.cmp(&b.name));
    Features {
        hostname: s(&facts.hostname),
        osrelease: s(&facts.osrelease),
        version: s(&facts.version),
        arch: s(&facts.arch),
        nr_cpus: facts.nr_cpus.unwrap_or((1, 1)),
        cmdline: facts
            .cmdline
            .iter()
            .map(|a| a.clone().into_bytes())
            .collect(),
        events: info
            .attrs
            .iter()
            .zip(&info.descs)
            .map(|(a, d)| (a.raw.clone(), d.name.to_string(), a.ids.clone()))
            .collect(),
        build_ids,
        tracing_data: facts.tracing_raw.clone(),
    }
}
