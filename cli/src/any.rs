//! `ferry ls NAME` and `ferry call NAME service.method arg=value ...`: any running server's
//! services, read from its file's calls table (each derived service's calls as the server listed
//! them: `ferry_rpc::service::CallInfo::line`), listed and called with arguments from the
//! command line.

use std::io::Write;
use std::time::Duration;

use ferry_rpc::__private::dynamic;
use ferry_rpc::service::{self, Site};
use ferry_shm::{path_for, ClientConfig, ShmClient};

use crate::Res;

/// One call as the calls table lists it.
#[derive(Debug, PartialEq)]
struct Call {
    method: String,
    opcode: u32,
    oneway: bool,
    args: Vec<(String, String, usize)>,
    reply: (String, usize),
    error: Option<(String, usize)>,
}

/// `type:size` (the type may hold colons: a path).
fn typed(s: &str) -> Option<(String, usize)> {
    let (ty, size) = s.trim().rsplit_once(':')?;
    Some((ty.to_string(), size.parse().ok()?))
}

/// One line of a calls table: `method opcode [oneway] (name:type:size, ...) -> type:size
/// [! error:size]`.
fn parse(line: &str) -> Option<Call> {
    let (head, rest) = line.split_once(" (")?;
    let mut words = head.split_whitespace();
    let method = words.next()?.to_string();
    let opcode = service::CallInfo::opcode_in_line(head)?;
    words.next()?;
    let oneway = words.next() == Some("oneway");
    let (args, rest) = rest.split_once(") -> ")?;
    let args = if args.is_empty() {
        Vec::new()
    } else {
        args.split(", ")
            .map(|a| {
                let (name, typed_) = a.split_once(':')?;
                let (ty, size) = typed(typed_)?;
                Some((name.to_string(), ty, size))
            })
            .collect::<Option<Vec<_>>>()?
    };
    let (reply, error) = match rest.split_once(" ! ") {
        Some((reply, error)) => (typed(reply)?, Some(typed(error)?)),
        None => (typed(rest)?, None),
    };
    Some(Call {
        method,
        opcode,
        oneway,
        args,
        reply,
        error,
    })
}

impl Call {
    /// The call as a Rust signature.
    fn signature(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|(n, t, _)| format!("{n}: {t}"))
            .collect();
        let value = if self.reply.0 == "()" {
            String::new()
        } else {
            self.reply.0.clone()
        };
        let ret = match (&self.error, value.is_empty()) {
            (Some((e, _)), true) => format!(" -> Result<(), {e}>"),
            (Some((e, _)), false) => format!(" -> Result<{value}, {e}>"),
            (None, true) => String::new(),
            (None, false) => format!(" -> {value}"),
        };
        let oneway = if self.oneway { "  (one-way)" } else { "" };
        format!("{}({}){ret}{oneway}", self.method, args.join(", "))
    }
}

fn attach(name: &str) -> Res<ShmClient> {
    ShmClient::attach(path_for(name), ClientConfig::default())
        .map_err(|e| format!("{name}: {e}").into())
}

/// The services and calls of a service's table.
fn services(shm: &ShmClient) -> Res<Vec<(String, u64, Vec<Call>)>> {
    shm.services()
        .iter()
        .zip(shm.calls())
        .map(|((name, fp), text)| {
            let calls = text
                .lines()
                .map(|l| parse(l).ok_or_else(|| format!("a call of {name} not understood: {l}")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((name.clone(), *fp, calls))
        })
        .collect()
}

/// `ferry ls NAME`.
pub fn ls(name: &str) -> Res<()> {
    let shm = attach(name)?;
    let mut out = std::io::stdout().lock();
    for (service, fp, calls) in services(&shm)? {
        writeln!(out, "{service}  (fingerprint {fp:#018x})")?;
        if calls.is_empty() {
            writeln!(
                out,
                "  (its calls are not listed: a service written by hand)"
            )?;
        }
        for call in calls {
            writeln!(out, "  {}", call.signature())?;
        }
    }
    Ok(())
}

/// The bytes of `value` as an argument of type `ty` and size `size`.
fn encode(name: &str, ty: &str, size: usize, value: &str) -> Res<Vec<u8>> {
    let bad = |what: &str| -> Box<dyn std::error::Error> {
        format!("argument `{name}`: `{value}` is not {what}").into()
    };
    macro_rules! int {
        ($t:ty) => {
            value
                .parse::<$t>()
                .map(|v| v.to_le_bytes().to_vec())
                .map_err(|_| bad(concat!("a ", stringify!($t))))?
        };
    }
    let bytes = match ty {
        "u8" => int!(u8),
        "u16" => int!(u16),
        "u32" => int!(u32),
        "u64" => int!(u64),
        "u128" => int!(u128),
        "usize" => int!(u64),
        "i8" => int!(i8),
        "i16" => int!(i16),
        "i32" => int!(i32),
        "i64" => int!(i64),
        "i128" => int!(i128),
        "isize" => int!(i64),
        "f32" => int!(f32),
        "f64" => int!(f64),
        "bool" => match value {
            "true" => vec![1],
            "false" => vec![0],
            _ => return Err(bad("true or false")),
        },
        "Text" => value.as_bytes().to_vec(),
        "Bytes" => match value.strip_prefix('@') {
            Some(path) => {
                std::fs::read(path).map_err(|e| format!("argument `{name}`: {path}: {e}"))?
            }
            None => value.as_bytes().to_vec(),
        },
        _ => {
            return Err(format!(
                "argument `{name}` is a `{ty}`: only integers, floats, bool, Text and Bytes \
                 (a file as @PATH) can be given on the command line"
            )
            .into())
        }
    };
    if !matches!(ty, "Text" | "Bytes") && bytes.len() != size {
        return Err(format!("argument `{name}`: a `{ty}` of {size} bytes on this server").into());
    }
    Ok(bytes)
}

/// A fixed value of type `ty` from its bytes, as text.
fn decode(ty: &str, bytes: &[u8]) -> String {
    macro_rules! num {
        ($t:ty) => {
            bytes
                .get(..core::mem::size_of::<$t>())
                .map(|b| <$t>::from_le_bytes(b.try_into().expect("sized")).to_string())
        };
    }
    let text = match ty {
        "u8" => num!(u8),
        "u16" => num!(u16),
        "u32" => num!(u32),
        "u64" | "usize" => num!(u64),
        "u128" => num!(u128),
        "i8" => num!(i8),
        "i16" => num!(i16),
        "i32" => num!(i32),
        "i64" | "isize" => num!(i64),
        "i128" => num!(i128),
        "f32" => num!(f32),
        "f64" => num!(f64),
        "bool" => bytes.first().map(|&b| (b != 0).to_string()),
        "()" => Some("()".into()),
        _ => None,
    };
    text.unwrap_or_else(|| {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("{ty} {{ bytes: {} }}", hex.join(" "))
    })
}

/// The most bytes a streamed reply may have here.
const REPLY_LIMIT: u64 = 1 << 30;

/// `ferry call NAME service.method arg=value ...`.
pub fn call(name: &str, target: &str, given: &[String], deadline: Duration) -> Res<()> {
    let shm = attach(name)?;
    let (service, method) = target.rsplit_once('.').ok_or_else(|| {
        format!("`{target}`: name the call as SERVICE.METHOD (see ferry ls {name})")
    })?;
    let listed = services(&shm)?;
    let (_, _, calls) = listed
        .iter()
        .find(|(s, _, _)| s == service)
        .ok_or_else(|| format!("{name} serves no service `{service}` (see ferry ls {name})"))?;
    let call = calls.iter().find(|c| c.method == method).ok_or_else(|| {
        format!("service `{service}` has no call `{method}` (see ferry ls {name})")
    })?;
    let mut values: Vec<(&str, &str)> = Vec::new();
    for g in given {
        let (k, v) = g
            .split_once('=')
            .ok_or_else(|| format!("`{g}`: give arguments as NAME=VALUE"))?;
        if !call.args.iter().any(|(n, _, _)| n == k) {
            return Err(format!("`{method}` has no argument `{k}`: {}", call.signature()).into());
        }
        values.push((k, v));
    }
    let mut request = Vec::new();
    let mut body: Option<Vec<u8>> = None;
    for (arg, ty, size) in &call.args {
        let value = values
            .iter()
            .find(|(k, _)| k == arg)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("argument `{arg}` missing: {}", call.signature()))?;
        let bytes = encode(arg, ty, *size, value)?;
        if matches!(ty.as_str(), "Text" | "Bytes") {
            body = Some(bytes);
        } else {
            request.extend_from_slice(&bytes);
        }
    }
    let stream_reply = matches!(call.reply.0.as_str(), "Bytes" | "Text");
    let tagged = call.error.is_some();
    let opcode = call.opcode;
    let failed = |e: service::Error| format!("{service}.{method}: {e}");
    if call.oneway {
        Site::call(&shm, Some(deadline), |claim| match &body {
            Some(b) => dynamic::stream(claim, opcode, &request, b, true, &mut []),
            None => dynamic::oneway(claim, opcode, &request),
        })
        .map_err(failed)?;
        println!("sent (one-way)");
        return Ok(());
    }
    if stream_reply {
        let replied = Site::call(&shm, Some(deadline), |claim| {
            dynamic::streamed_reply(
                claim,
                opcode,
                &request,
                body.as_deref(),
                REPLY_LIMIT,
                tagged,
            )
        })
        .map_err(failed)?;
        if let Some(e) = replied.error {
            let (ety, esize) = call
                .error
                .as_ref()
                .expect("a tagged call has an error type");
            return Err(format!("{service}.{method}: error {}", decode(ety, &e[..*esize])).into());
        }
        let mut out = std::io::stdout().lock();
        out.write_all(&replied.bytes)?;
        if call.reply.0 == "Text" {
            writeln!(out)?;
        }
        return Ok(());
    }
    let value_size = call.reply.1;
    let len = match &call.error {
        Some((_, esize)) => 1 + value_size.max(*esize),
        None => value_size,
    };
    let mut reply = vec![0u8; len];
    Site::call(&shm, Some(deadline), |claim| match &body {
        Some(b) => dynamic::stream(claim, opcode, &request, b, false, &mut reply),
        None => dynamic::fixed(claim, opcode, &request, &mut reply),
    })
    .map_err(failed)?;
    match &call.error {
        Some((ety, esize)) if reply.first() == Some(&1) => Err(format!(
            "{service}.{method}: error {}",
            decode(ety, &reply[1..1 + esize])
        )
        .into()),
        Some(_) => {
            println!("{}", decode(&call.reply.0, &reply[1..1 + value_size]));
            Ok(())
        }
        None => {
            println!("{}", decode(&call.reply.0, &reply));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_line_parses_back() {
        let c = parse("put 0x8a3c19f0 (key:u32:4, value:Bytes:0) -> u64:8 ! StoreError:4").unwrap();
        assert_eq!(c.method, "put");
        assert_eq!(c.opcode, 0x8a3c19f0);
        assert!(!c.oneway);
        assert_eq!(c.args[1], ("value".into(), "Bytes".into(), 0));
        assert_eq!(c.reply, ("u64".into(), 8));
        assert_eq!(c.error, Some(("StoreError".into(), 4)));
        assert_eq!(
            c.signature(),
            "put(key: u32, value: Bytes) -> Result<u64, StoreError>"
        );
        let c = parse("reset 0x00000001 oneway () -> ():0").unwrap();
        assert!(c.oneway && c.args.is_empty());
        assert_eq!(c.signature(), "reset()  (one-way)");
        let c = parse("at 0x00000002 (p:my_crate::Point:8) -> my_crate::Point:8").unwrap();
        assert_eq!(c.args[0].1, "my_crate::Point");
        assert!(parse("garbage").is_none());
    }

    #[test]
    fn arguments_encode_and_refuse_what_the_command_line_cannot_give() {
        assert_eq!(encode("n", "u64", 8, "5").unwrap(), 5u64.to_le_bytes());
        assert_eq!(encode("x", "i16", 2, "-2").unwrap(), (-2i16).to_le_bytes());
        assert!(encode("n", "u8", 1, "300").is_err());
        assert!(encode("p", "Point", 8, "1").is_err());
        assert_eq!(encode("t", "Text", 0, "hi").unwrap(), b"hi");
        assert_eq!(decode("u32", &7u32.to_le_bytes()), "7");
        assert_eq!(decode("Stats", &[1, 2]), "Stats { bytes: 01 02 }");
    }
}
