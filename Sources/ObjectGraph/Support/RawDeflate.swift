import Foundation
internal import CZlib

/// Raw deflate (RFC 1951, no zlib header), as Core Data compresses the model it keeps in a
/// store's `Z_MODELCACHE`; by the system's zlib.
enum RawDeflate {
    struct Failure: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }

    /// The bytes `data` inflates to, at most `limit` of them: bytes from a file must not be
    /// able to fill the memory.
    static func inflate(_ data: Data, limit: Int) throws(Failure) -> Data {
        var stream = z_stream()
        guard og_inflate_init_raw(&stream) == Z_OK else { throw Failure(reason: "zlib cannot start inflating") }
        defer { inflateEnd(&stream) }
        var input = [UInt8](data)
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let status: Int32 = input.withUnsafeMutableBufferPointer { inputBuffer in
            stream.next_in = inputBuffer.baseAddress
            stream.avail_in = uInt(inputBuffer.count)
            while true {
                let result: Int32 = chunk.withUnsafeMutableBufferPointer { chunkBuffer in
                    stream.next_out = chunkBuffer.baseAddress
                    stream.avail_out = uInt(chunkBuffer.count)
                    let result = CZlib.inflate(&stream, Z_NO_FLUSH)
                    output.append(chunkBuffer.baseAddress!, count: chunkBuffer.count - Int(stream.avail_out))
                    return result
                }
                if result == Z_STREAM_END { return result }
                if output.count > limit { return Z_MEM_ERROR }
                // No progress with input left means the stream is cut short.
                if result != Z_OK || (stream.avail_in == 0 && stream.avail_out != 0) {
                    return result == Z_OK ? Z_BUF_ERROR : result
                }
            }
        }
        switch status {
        case Z_STREAM_END:
            guard output.count <= limit else { throw Failure(reason: "inflates to more than \(limit) bytes") }
            return output
        case Z_MEM_ERROR: throw Failure(reason: "inflates to more than \(limit) bytes")
        case Z_BUF_ERROR: throw Failure(reason: "the compressed data is cut short")
        default: throw Failure(reason: "not raw deflate data (zlib error \(status))")
        }
    }

    /// `data` compressed.
    static func deflate(_ data: Data) throws(Failure) -> Data {
        var stream = z_stream()
        guard og_deflate_init_raw(&stream) == Z_OK else { throw Failure(reason: "zlib cannot start deflating") }
        defer { deflateEnd(&stream) }
        var input = [UInt8](data)
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
        let status: Int32 = input.withUnsafeMutableBufferPointer { inputBuffer in
            output.withUnsafeMutableBufferPointer { outputBuffer in
                stream.next_in = inputBuffer.baseAddress
                stream.avail_in = uInt(inputBuffer.count)
                stream.next_out = outputBuffer.baseAddress
                stream.avail_out = uInt(outputBuffer.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { throw Failure(reason: "zlib could not deflate (error \(status))") }
        return Data(output.prefix(Int(stream.total_out)))
    }
}
